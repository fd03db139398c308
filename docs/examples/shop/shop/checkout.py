"""Checkout: turns a cart into an order and a payment."""

from shop.models import LineItem, Order
from shop.payments import Payment, create_payment


def checkout(order_id: str, email: str, cart: dict[str, tuple[int, int]]) -> Payment:
    """Build the order from the cart and create its payment."""
    items = [LineItem(sku, qty, price) for sku, (qty, price) in cart.items()]
    order = Order(order_id=order_id, customer_email=email, items=items)
    
