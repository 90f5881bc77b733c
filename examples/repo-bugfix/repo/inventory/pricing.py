"""Prices: the bulk discount on a line, the customer's tier discount on the order."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from .models import Order, OrderLine

#: A line of this many units of one product, or more, gets the bulk discount.
BULK_THRESHOLD = 10
BULK_DISCOUNT = Decimal("0.10")

TIER_DISCOUNTS = {
    "standard": Decimal("0"),
    "silver": Decimal("0.05"),
    "gold": Decimal("0.10"),
}

CENT = Decimal("0.01")


def to_cents(amount: Decimal) -> Decimal:
    """Rounds to whole cents, halves up (as the till does)."""
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def is_bulk(quantity: int) -> bool:
    """True when a line of `quantity` units gets the bulk discount."""
    return quantity > BULK_THRESHOLD


def line_total(line: OrderLine) -> Decimal:
    """The line's subtotal less the bulk discount where it applies, in cents."""
    total = line.subtotal
    if is_bulk(line.quantity):
        total = total - total * BULK_DISCOUNT
    return to_cents(total)


def tier_discount(tier: str) -> Decimal:
    """The discount rate of a customer tier."""
    try:
        return TIER_DISCOUNTS[tier]
    except KeyError:
        raise ValueError(f"unknown customer tier {tier!r}") from None


def order_total(order: Order) -> Decimal:
    """The sum of the line totals less the customer's tier discount, in cents."""
    subtotal = sum((line_total(line) for line in order.lines), Decimal("0"))
    return to_cents(subtotal * (1 - tier_discount(order.customer_tier)))
