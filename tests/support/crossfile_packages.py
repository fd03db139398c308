"""Two small packages for the cross-file line benchmark's tests: Python (``shop``, where
only some lines are fit to be a task) and TypeScript (``kit``)."""

from __future__ import annotations

MODELS = '''"""Orders and their lines."""


class Order:
    def __init__(self, number):
        self.number = number
        self.lines = []


def order_total(order, *, tax=0.2):
    return sum(line.price for line in order.lines) * (1 + tax)


def local_helper(x):
    return x


def make_receipt(number):
    return f"receipt {number}"
'''

CHECKOUT = '''"""Checking out."""
from shop import models
from shop.models import Order, order_total


def local_helper(value):
    return value


def checkout(number):
    draft = local_helper(number)
    # a comment that names Order(number) is no line to type
    order = Order(draft)
    order.lines.append(number)
    total = order_total(order, tax=0.1)
    again = models.order_total(order)
    return total + again


def twice(number):
    first = Order(number)
    first = Order(number)
    return first


def later(number):
    return make_receipt(number)


from shop.models import make_receipt
'''

UTIL_TS = """export function formatPrice(value: number): string {
  return value.toFixed(2)
}

export interface Basket {
  items: number[]
  owner: string
}
"""

CART_TS = """import { formatPrice, type Basket } from './util'

export function label(basket: Basket): string {
  const sum = basket.items.reduce((a, b) => a + b, 0)
  const shown = formatPrice(sum)
  return `${basket.owner}: ${shown}`
}
"""
