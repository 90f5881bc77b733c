from decimal import Decimal

import pytest

from inventory.models import Order, OrderLine, Product

PEN = Product("PEN-01", "Ballpoint pen", Decimal("1.20"), "stationery")
PAD = Product("PAD-A4", "A4 notepad", Decimal("3.50"), "stationery")


def test_product_rejects_negative_price():
    with pytest.raises(ValueError):
        Product("X-1", "Broken", Decimal("-1"))


def test_product_needs_a_sku():
    with pytest.raises(ValueError):
        Product("  ", "Nameless", Decimal("1"))


def test_line_subtotal():
    assert OrderLine(PEN, 3).subtotal == Decimal("3.60")


def test_line_quantity_must_be_positive():
    with pytest.raises(ValueError):
        OrderLine(PEN, 0)


def test_add_merges_the_same_product():
    order = Order()
    order.add(PEN, 2)
    order.add(PAD)
    order.add(PEN, 3)
    assert [(line.product.sku, line.quantity) for line in order.lines] == [("PEN-01", 5), ("PAD-A4", 1)]
    assert order.item_count == 6
