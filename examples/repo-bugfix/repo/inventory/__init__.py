"""Products, orders and their prices for a small shop."""

from .models import Order, OrderLine, Product
from .pricing import BULK_DISCOUNT, BULK_THRESHOLD, line_total, order_total
from .report import order_summary

__all__ = [
    "BULK_DISCOUNT",
    "BULK_THRESHOLD",
    "Order",
    "OrderLine",
    "Product",
    "line_total",
    "order_summary",
    "order_total",
]
