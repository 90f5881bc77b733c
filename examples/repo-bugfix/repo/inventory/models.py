"""Products and orders. Prices are Decimals, in the shop's currency."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import List


@dataclass(frozen=True)
class Product:
    """Something the shop sells."""

    sku: str
    name: str
    unit_price: Decimal
    category: str = "general"

    def __post_init__(self) -> None:
        if not self.sku.strip():
            raise ValueError("a product needs a SKU")
        if self.unit_price < 0:
            raise ValueError(f"{self.sku}: the unit price cannot be negative")


@dataclass
class OrderLine:
    """A quantity of one product in an order."""

    product: Product
    quantity: int

    def __post_init__(self) -> None:
        if self.quantity < 1:
            raise ValueError(f"{self.product.sku}: the quantity must be at least 1")

    @property
    def subtotal(self) -> Decimal:
        """Unit price times quantity, before any discount."""
        return self.product.unit_price * self.quantity


@dataclass
class Order:
    """A customer's order: its lines and the customer's tier."""

    customer_tier: str = "standard"
    lines: List[OrderLine] = field(default_factory=list)

    def add(self, product: Product, quantity: int = 1) -> OrderLine:
        """Adds `quantity` units of `product`; a product already in the order gets one line."""
        for line in self.lines:
            if line.product.sku == product.sku:
                line.quantity += quantity
                return line
        line = OrderLine(product, quantity)
        self.lines.append(line)
        return line

    @property
    def item_count(self) -> int:
        """Units in the order, all lines together."""
        return sum(line.quantity for line in self.lines)
