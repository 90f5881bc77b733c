from decimal import Decimal

import pytest

from inventory.models import Order, OrderLine, Product
from inventory.pricing import BULK_THRESHOLD, line_total, order_total
from inventory.report import order_summary

CABLE = Product("USB-C-1M", "USB-C cable 1 m", Decimal("2.50"), "electronics")
MUG = Product("MUG-W", "White mug", Decimal("6.99"), "kitchen")


def test_line_total_without_discount():
    assert line_total(OrderLine(CABLE, 3)) == Decimal("7.50")


def test_line_total_below_threshold():
    assert line_total(OrderLine(MUG, BULK_THRESHOLD - 1)) == Decimal("62.91")


def test_bulk_discount_starts_at_threshold():
    # 10 cables at 2.50 are 25.00; the bulk discount takes 10% off.
    assert line_total(OrderLine(CABLE, BULK_THRESHOLD)) == Decimal("22.50")


def test_bulk_discount_above_threshold():
    assert line_total(OrderLine(CABLE, 20)) == Decimal("45.00")


def test_order_total_with_tier_discount():
    order = Order(customer_tier="silver")
    order.add(MUG, 2)
    order.add(CABLE, 1)
    # (13.98 + 2.50) less 5% = 15.656 -> 15.66
    assert order_total(order) == Decimal("15.66")


def test_unknown_tier_is_an_error():
    with pytest.raises(ValueError, match="unknown customer tier"):
        order_total(Order(customer_tier="platinum"))


def test_summary_lists_lines_and_total():
    order = Order()
    order.add(MUG, 1)
    text = order_summary(order)
    assert "White mug" in text
    assert text.splitlines()[-1].endswith("6.99")
