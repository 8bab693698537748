"""τ-bench retail tools, written for rizz from the domain policy (``retail/wiki.md``) and the
database format (``users``, ``orders``, ``products``); no τ-bench code was copied.

Every tool is ``tool(db: Tables, **arguments) -> JSON-able | str`` and raises
:class:`~rizz.adapters.agents.tools.ToolError` for what the policy forbids or the database lacks.
Writes follow the policy text: cancel → ``cancelled`` with refunds; modify items → ``pending
(item modified)``; return → ``return requested``; exchange → ``exchange requested``; gift-card
refunds and payments move the card's ``balance`` at once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from rizz.adapters.agents.tau_db import COMMON_TOOLS, Tables
from rizz.adapters.agents.tau_schema import ADDRESS, COMMON_SCHEMAS, arr, fn, n, s
from rizz.adapters.agents.tools import ToolError

__all__ = ["TOOLS", "SCHEMAS"]

CANCEL_REASONS = ("no longer needed", "ordered by mistake")


def _order(db: Tables, order_id: str) -> Any:
    return db.need("orders", order_id, "order")


def _user(db: Tables, user_id: str) -> Any:
    return db.need("users", user_id, "user")


def _method(db: Tables, user_id: str, method_id: str) -> Any:
    method = _user(db, user_id)["payment_methods"].get(method_id)
    if method is None:
        raise ToolError(f"payment method {method_id!r} not found in the user's profile")
    return method


def _gift_move(db: Tables, user_id: str, method_id: str, amount: float) -> None:
    """Add ``amount`` (negative: charge) to a gift card's balance; refuse an overdraft."""
    if _method(db, user_id, method_id)["source"] != "gift_card":
        return
    card = db.mut("users", user_id)["payment_methods"][method_id]
    if card["balance"] + amount < 0:
        raise ToolError(f"gift card {method_id} has a balance of {card['balance']}, not enough for {-amount}")
    card["balance"] = round(card["balance"] + amount, 2)


def _status(order: Any, wanted: str, action: str) -> None:
    if order["status"] != wanted:
        raise ToolError(f"cannot {action}: order {order['order_id']} is {order['status']!r}, not {wanted!r}")


def _items(order: Any, item_ids: list[str]) -> list[Any]:
    """The order's items for ``item_ids`` (repeats allowed as often as the order has them)."""
    have = Counter(i["item_id"] for i in order["items"])
    for item_id, k in Counter(item_ids).items():
        if have[item_id] < k:
            raise ToolError(f"item {item_id} is not in order {order['order_id']} {k} time(s)")
    return [next(i for i in order["items"] if i["item_id"] == item_id) for item_id in item_ids]


def _swap(db: Tables, order: Any, item_ids: list[str], new_item_ids: list[str]) -> tuple[list[Any], float]:
    """New variants for ``item_ids``, same product, available; the price difference (new − old)."""
    if len(item_ids) != len(new_item_ids):
        raise ToolError("item_ids and new_item_ids must have the same length")
    old = _items(order, item_ids)
    new, diff = [], 0.0
    for item, new_id in zip(old, new_item_ids):
        product = db.get("products", item["product_id"])
        variant = product["variants"].get(new_id) if product else None
        if variant is None:
            raise ToolError(f"new item {new_id} is not a variant of product {item['product_id']} ({item['name']})")
        if not variant["available"]:
            raise ToolError(f"new item {new_id} is not available")
        new.append(variant)
        diff += variant["price"] - item["price"]
    return new, round(diff, 2)


def find_user_id_by_email(db: Tables, email: str) -> str:
    for key in db.ids("users"):
        if db.get("users", key)["email"].lower() == str(email).lower():
            return key
    raise ToolError("user not found")


def find_user_id_by_name_zip(db: Tables, first_name: str, last_name: str, zip: str) -> str:
    for key in db.ids("users"):
        u = db.get("users", key)
        if (u["name"]["first_name"].lower(), u["name"]["last_name"].lower(), u["address"]["zip"]) == \
                (str(first_name).lower(), str(last_name).lower(), str(zip)):
            return key
    raise ToolError("user not found")


def get_user_details(db: Tables, user_id: str) -> Any:
    return _user(db, user_id)


def get_order_details(db: Tables, order_id: str) -> Any:
    return _order(db, order_id)


def get_product_details(db: Tables, product_id: str) -> Any:
    product = db.get("products", product_id)
    if product is None:
        raise ToolError(f"product {product_id!r} not found")
    return product


def list_all_product_types(db: Tables) -> Any:
    return dict(sorted((p["name"], p["product_id"]) for p in db.values("products")))


def cancel_pending_order(db: Tables, order_id: str, reason: str) -> Any:
    _status(_order(db, order_id), "pending", "cancel")
    if reason not in CANCEL_REASONS:
        raise ToolError(f"reason must be one of {', '.join(map(repr, CANCEL_REASONS))}")
    order = db.mut("orders", order_id)
    for pay in [p for p in order["payment_history"] if p["transaction_type"] == "payment"]:
        order["payment_history"].append({"transaction_type": "refund", "amount": pay["amount"],
                                         "payment_method_id": pay["payment_method_id"]})
        _gift_move(db, order["user_id"], pay["payment_method_id"], pay["amount"])
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    return order


def modify_pending_order_address(db: Tables, order_id: str, address1: str, address2: str, city: str,
                                 state: str, country: str, zip: str) -> Any:
    _status(_order(db, order_id), "pending", "modify the address of")
    order = db.mut("orders", order_id)
    order["address"] = {"address1": address1, "address2": address2, "city": city, "country": country,
                        "state": state, "zip": zip}
    return order


def modify_pending_order_payment(db: Tables, order_id: str, payment_method_id: str) -> Any:
    order = _order(db, order_id)
    _status(order, "pending", "modify the payment of")
    payments = [p for p in order["payment_history"] if p["transaction_type"] == "payment"]
    if len(payments) != 1:
        raise ToolError("only an order paid with a single payment method can change it")
    old = payments[0]
    if old["payment_method_id"] == payment_method_id:
        raise ToolError("the new payment method must differ from the original one")
    _method(db, order["user_id"], payment_method_id)
    _gift_move(db, order["user_id"], payment_method_id, -old["amount"])
    _gift_move(db, order["user_id"], old["payment_method_id"], old["amount"])
    order = db.mut("orders", order_id)
    order["payment_history"] += [
        {"transaction_type": "payment", "amount": old["amount"], "payment_method_id": payment_method_id},
        {"transaction_type": "refund", "amount": old["amount"], "payment_method_id": old["payment_method_id"]}]
    return order


def modify_pending_order_items(db: Tables, order_id: str, item_ids: list[str], new_item_ids: list[str],
                               payment_method_id: str) -> Any:
    order = _order(db, order_id)
    _status(order, "pending", "modify the items of")
    new, diff = _swap(db, order, list(item_ids), list(new_item_ids))
    _method(db, order["user_id"], payment_method_id)
    _gift_move(db, order["user_id"], payment_method_id, -diff)
    order = db.mut("orders", order_id)
    for old_id, variant in zip(item_ids, new):
        item = next(i for i in order["items"] if i["item_id"] == old_id and not i.get("_swapped"))
        item.update(item_id=variant["item_id"], price=variant["price"], options=variant["options"], _swapped=True)
    for item in order["items"]:
        item.pop("_swapped", None)
    order["payment_history"].append({"transaction_type": "payment" if diff > 0 else "refund",
                                     "amount": abs(diff), "payment_method_id": payment_method_id})
    order["status"] = "pending (item modified)"
    return order


def return_delivered_order_items(db: Tables, order_id: str, item_ids: list[str], payment_method_id: str) -> Any:
    order = _order(db, order_id)
    _status(order, "delivered", "return")
    _items(order, list(item_ids))
    originals = {p["payment_method_id"] for p in order["payment_history"]}
    method = _method(db, order["user_id"], payment_method_id)
    if payment_method_id not in originals and method["source"] != "gift_card":
        raise ToolError("the refund must go to the original payment method or an existing gift card")
    order = db.mut("orders", order_id)
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return order


def exchange_delivered_order_items(db: Tables, order_id: str, item_ids: list[str], new_item_ids: list[str],
                                   payment_method_id: str) -> Any:
    order = _order(db, order_id)
    _status(order, "delivered", "exchange")
    _, diff = _swap(db, order, list(item_ids), list(new_item_ids))
    method = _method(db, order["user_id"], payment_method_id)
    if method["source"] == "gift_card" and method["balance"] < diff:
        raise ToolError(f"gift card {payment_method_id} has a balance of {method['balance']}, not enough for {diff}")
    order = db.mut("orders", order_id)
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = diff
    return order


def modify_user_address(db: Tables, user_id: str, address1: str, address2: str, city: str, state: str,
                        country: str, zip: str) -> Any:
    _user(db, user_id)
    user = db.mut("users", user_id)
    user["address"] = {"address1": address1, "address2": address2, "city": city, "country": country,
                       "state": state, "zip": zip}
    return user


TOOLS: dict[str, Callable[..., Any]] = {
    f.__name__.lstrip("_"): f for f in (
        find_user_id_by_email, find_user_id_by_name_zip, get_user_details, get_order_details,
        get_product_details, list_all_product_types, cancel_pending_order, modify_pending_order_address,
        modify_pending_order_payment, modify_pending_order_items, return_delivered_order_items,
        exchange_delivered_order_items, modify_user_address)
} | COMMON_TOOLS

_ITEMS = arr(s("An item id (10 digits)."), "Item ids, in the order's item order.")
SCHEMAS: list[dict[str, Any]] = [
    fn("find_user_id_by_email", "Find a user id by email (authentication).", {"email": s("The user's email.")}),
    fn("find_user_id_by_name_zip", "Find a user id by first name, last name and zip code (authentication).",
       {"first_name": s("First name."), "last_name": s("Last name."), "zip": s("Zip code, e.g. '10001'.")}),
    fn("get_user_details", "The user's profile: name, address, email, payment methods, order ids.",
       {"user_id": s("The user id, e.g. 'sara_doe_496'.")}),
    fn("get_order_details", "An order's status, items, fulfillments and payments.",
       {"order_id": s("The order id with its '#', e.g. '#W0000000'.")}),
    fn("get_product_details", "A product's variants: item ids, options, availability, prices.",
       {"product_id": s("The product id (not an item id).")}),
    fn("list_all_product_types", "All 50 product types: name -> product id."),
    fn("cancel_pending_order", "Cancel a pending order (after the user confirms); refunds the payments.",
       {"order_id": s("The order id."), "reason": s("'no longer needed' or 'ordered by mistake'.")}),
    fn("modify_pending_order_address", "Change the shipping address of a pending order.",
       {"order_id": s("The order id."), **ADDRESS}),
    fn("modify_pending_order_payment", "Pay a pending order with another single payment method.",
       {"order_id": s("The order id."), "payment_method_id": s("e.g. 'gift_card_0000000'.")}),
    fn("modify_pending_order_items", "Swap items of a pending order for other options of the same product (once).",
       {"order_id": s("The order id."), "item_ids": _ITEMS, "new_item_ids": _ITEMS,
        "payment_method_id": s("Pays or receives the price difference.")}),
    fn("return_delivered_order_items", "Request a return of delivered items.",
       {"order_id": s("The order id."), "item_ids": _ITEMS,
        "payment_method_id": s("The original payment method or an existing gift card.")}),
    fn("exchange_delivered_order_items", "Exchange delivered items for other options of the same product (once).",
       {"order_id": s("The order id."), "item_ids": _ITEMS, "new_item_ids": _ITEMS,
        "payment_method_id": s("Pays or receives the price difference.")}),
    fn("modify_user_address", "Change the user's default address.", {"user_id": s("The user id."), **ADDRESS}),
    *COMMON_SCHEMAS,
]
_ = n
