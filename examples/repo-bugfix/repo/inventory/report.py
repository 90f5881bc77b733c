"""A plain-text summary of an order, as printed on the packing slip."""

from __future__ import annotations

from .models import Order
from .pricing import is_bulk, line_total, order_total


def order_summary(order: Order) -> str:
    """One line per product (bulk lines marked), then the total."""
    rows = []
    for line in order.lines:
        mark = " (bulk)" if is_bulk(line.quantity) else ""
        rows.append(f"{line.quantity:>4} x {line.product.name:<20} {line_total(line):>9}{mark}")
    rows.append(f"{'total':>27} {order_total(order):>9}")
    return "\n".join(rows)
