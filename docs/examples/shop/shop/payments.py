"""Payment module: depends on the order models, exposes create_payment."""

from dataclasses import dataclass

from shop.models import Order

CURRENCY = "EUR"


@dataclass
class Payment:
    """A payment request sent to the card processor."""

    order_id: str
    amount_cents: int
    currency: str


def create_payment(order: Order, currency: str = CURRENCY) -> Payment:
    """Create the payment for an order's total."""
    return Payment(order_id=order.order_id, amount_cents=order.total_cents(), currency=currency)
