"""Order and line-item models of the shop."""

from dataclasses import dataclass, field


@dataclass
class LineItem:
    """One product in an order."""

    sku: str
    quantity: int
    unit_price_cents: int

    def subtotal_cents(self) -> int:
        """Price of this line: quantity times unit price."""
        return self.quantity * self.unit_price_cents


@dataclass
class Order:
    """A customer's order."""

    order_id: str
    customer_email: str
    items: list[LineItem] = field(default_factory=list)

    def total_cents(self) -> int:
        """Sum of every line's subtotal."""
        return sum(item.subtotal_cents() for item in self.items)
