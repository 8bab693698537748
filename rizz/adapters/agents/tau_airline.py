"""τ-bench airline tools, written for rizz from the domain policy (``airline/wiki.md``) and the
database format (``users``, ``flights``, ``reservations``); no τ-bench code was copied.

Every tool is ``tool(db: Tables, **arguments) -> JSON-able | str``. What the policy says "the
API does not check" (who may cancel, which segments may change) is left to the agent, as the
policy says; what the data decides (a flight is bookable on a date, seats, prices, payment
methods in the profile, gift-card and certificate balances, the payment total) is checked.
The current time is the policy's, 2024-05-15 15:00:00 EST (:data:`NOW`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from rizz.adapters.agents.tau_db import COMMON_TOOLS, Tables
from rizz.adapters.agents.tau_schema import COMMON_SCHEMAS, arr, fn, n, obj, s
from rizz.adapters.agents.tools import ToolError

__all__ = ["NOW", "SCHEMAS", "TOOLS"]

#: The policy's current time (airline/wiki.md: "The current time is 2024-05-15 15:00:00 EST").
NOW = "2024-05-15T15:00:00"
#: Price of one checked bag beyond the allowance, USD; insurance per passenger, USD (wiki.md).
BAG_USD, INSURANCE_USD = 50, 30
CABINS = ("basic_economy", "economy", "business")


def _user(db: Tables, user_id: str) -> Any:
    return db.need("users", user_id, "user")


def _reservation(db: Tables, reservation_id: str) -> Any:
    return db.need("reservations", reservation_id, "reservation")


def _bookable(db: Tables, flight_number: str, date: str, cabin: str, seats: int) -> tuple[Any, Any]:
    flight = db.get("flights", flight_number)
    if flight is None:
        raise ToolError(f"flight {flight_number!r} not found")
    day = flight["dates"].get(date)
    if day is None or day.get("status") != "available":
        raise ToolError(f"flight {flight_number} is not available on {date}")
    if cabin not in CABINS:
        raise ToolError(f"cabin must be one of {', '.join(CABINS)}")
    if day["available_seats"][cabin] < seats:
        raise ToolError(f"flight {flight_number} has {day['available_seats'][cabin]} {cabin} seats on {date}")
    return flight, day


def _charge(db: Tables, user_id: str, payment_id: str, amount: float) -> None:
    """Charge (amount > 0) or refund (< 0) a profile payment method; gift cards and certificates move balances."""
    method = _user(db, user_id)["payment_methods"].get(payment_id)
    if method is None:
        raise ToolError(f"payment method {payment_id!r} is not in the user's profile")
    if method["source"] == "gift_card":
        card = db.mut("users", user_id)["payment_methods"][payment_id]
        if card["amount"] < amount:
            raise ToolError(f"gift card {payment_id} has {card['amount']}, not enough for {amount}")
        card["amount"] = round(card["amount"] - amount, 2)
    elif method["source"] == "certificate":
        if amount < 0:
            raise ToolError("a certificate cannot receive a refund")
        if method["amount"] < amount:
            raise ToolError(f"certificate {payment_id} is worth {method['amount']}, not enough for {amount}")
        del db.mut("users", user_id)["payment_methods"][payment_id]  # the rest is not refundable


def get_user_details(db: Tables, user_id: str) -> Any:
    return _user(db, user_id)


def get_reservation_details(db: Tables, reservation_id: str) -> Any:
    return _reservation(db, reservation_id)


def list_all_airports(db: Tables) -> Any:
    return sorted({f["origin"] for f in db.values("flights")} | {f["destination"] for f in db.values("flights")})


def _summary(flight: Any, date: str, day: Any) -> dict[str, Any]:
    return {k: v for k, v in flight.items() if k != "dates"} | {
        "date": date, "status": day["status"], "available_seats": day["available_seats"], "prices": day["prices"]}


def search_direct_flight(db: Tables, origin: str, destination: str, date: str) -> Any:
    out = []
    for f in db.values("flights"):
        day = f["dates"].get(date)
        if f["origin"] == origin and f["destination"] == destination and day and day.get("status") == "available":
            out.append(_summary(f, date, day))
    return out


def search_onestop_flight(db: Tables, origin: str, destination: str, date: str) -> Any:
    out = []
    flights = db.values("flights")
    for a in flights:
        day_a = a["dates"].get(date)
        if a["origin"] != origin or not day_a or day_a.get("status") != "available":
            continue
        for b in flights:
            if b["origin"] != a["destination"] or b["destination"] != destination:
                continue
            overnight = b["scheduled_departure_time_est"] < a["scheduled_arrival_time_est"]
            date_b = date if not overnight else f"{date[:8]}{int(date[8:]) + 1:02d}"
            day_b = b["dates"].get(date_b)
            if day_b and day_b.get("status") == "available":
                out.append([_summary(a, date, day_a), _summary(b, date_b, day_b)])
    return out


def _pay_methods(db: Tables, user_id: str, payments: list[Any], total: float) -> list[dict[str, Any]]:
    kinds = [(_user(db, user_id)["payment_methods"].get(p["payment_id"]) or {}).get("source") for p in payments]
    if kinds.count("certificate") > 1 or kinds.count("credit_card") > 1 or kinds.count("gift_card") > 3:
        raise ToolError("at most one certificate, one credit card and three gift cards per reservation")
    paid = round(sum(p["amount"] for p in payments), 2)
    if paid != round(total, 2):
        raise ToolError(f"the payments add up to {paid}, but the total price is {round(total, 2)}")
    for p in payments:
        _charge(db, user_id, p["payment_id"], p["amount"])
    return [{"payment_id": p["payment_id"], "amount": p["amount"]} for p in payments]


def book_reservation(db: Tables, user_id: str, origin: str, destination: str, flight_type: str, cabin: str,
                     flights: list[Any], passengers: list[Any], payment_methods: list[Any], total_baggages: int,
                     nonfree_baggages: int, insurance: str) -> Any:
    _user(db, user_id)
    if flight_type not in ("one_way", "round_trip"):
        raise ToolError("flight_type must be 'one_way' or 'round_trip'")
    if not 1 <= len(passengers) <= 5:
        raise ToolError("a reservation has one to five passengers")
    segments, total = [], 0.0
    for seg in flights:
        flight, day = _bookable(db, seg["flight_number"], seg["date"], cabin, len(passengers))
        price = day["prices"][cabin]
        segments.append({"origin": flight["origin"], "destination": flight["destination"],
                         "flight_number": flight["flight_number"], "date": seg["date"], "price": price})
        total += price * len(passengers)
    total += INSURANCE_USD * len(passengers) * (insurance == "yes") + BAG_USD * nonfree_baggages
    history = _pay_methods(db, user_id, list(payment_methods), total)
    for seg in segments:
        db.mut("flights", seg["flight_number"])["dates"][seg["date"]]["available_seats"][cabin] -= len(passengers)
    seed = f"{user_id}|{len(db.ids('reservations'))}".encode()
    rid = hashlib.sha256(seed).hexdigest()[:6].upper()
    res = {"reservation_id": rid, "user_id": user_id, "origin": origin, "destination": destination,
           "flight_type": flight_type, "cabin": cabin, "flights": segments, "passengers": list(passengers),
           "payment_history": history, "created_at": NOW, "total_baggages": total_baggages,
           "nonfree_baggages": nonfree_baggages, "insurance": insurance}
    db.insert("reservations", rid, res)
    db.mut("users", user_id)["reservations"].append(rid)
    return res


def cancel_reservation(db: Tables, reservation_id: str) -> Any:
    res = _reservation(db, reservation_id)
    if res.get("status") == "cancelled":
        raise ToolError(f"reservation {reservation_id} is already cancelled")
    res = db.mut("reservations", reservation_id)
    res["payment_history"] += [{"payment_id": p["payment_id"], "amount": -p["amount"]} for p in list(res["payment_history"])]
    res["status"] = "cancelled"
    return res


def update_reservation_baggages(db: Tables, reservation_id: str, total_baggages: int, nonfree_baggages: int,
                                payment_id: str) -> Any:
    res = _reservation(db, reservation_id)
    if total_baggages < res["total_baggages"] or nonfree_baggages < res["nonfree_baggages"]:
        raise ToolError("checked bags can be added, not removed")
    cost = BAG_USD * (nonfree_baggages - res["nonfree_baggages"])
    if cost:
        _charge(db, res["user_id"], payment_id, cost)
    res = db.mut("reservations", reservation_id)
    res.update(total_baggages=total_baggages, nonfree_baggages=nonfree_baggages)
    if cost:
        res["payment_history"].append({"payment_id": payment_id, "amount": cost})
    return res


def update_reservation_flights(db: Tables, reservation_id: str, cabin: str, flights: list[Any], payment_id: str) -> Any:
    res = _reservation(db, reservation_id)
    pax = len(res["passengers"])
    kept = {(f["flight_number"], f["date"]): f for f in res["flights"]}
    segments, total = [], 0.0
    for seg in flights:
        old = kept.get((seg["flight_number"], seg["date"]))
        if old is not None and cabin == res["cabin"]:
            segments.append(dict(old))  # a kept segment keeps its price (wiki.md)
        else:
            flight, day = _bookable(db, seg["flight_number"], seg["date"], cabin, pax)
            segments.append({"origin": flight["origin"], "destination": flight["destination"],
                             "flight_number": flight["flight_number"], "date": seg["date"],
                             "price": day["prices"][cabin]})
        total += segments[-1]["price"] * pax
    diff = round(total - sum(f["price"] for f in res["flights"]) * pax, 2)
    _charge(db, res["user_id"], payment_id, diff)
    res = db.mut("reservations", reservation_id)
    res.update(flights=segments, cabin=cabin)
    if diff:
        res["payment_history"].append({"payment_id": payment_id, "amount": diff})
    return res


def update_reservation_passengers(db: Tables, reservation_id: str, passengers: list[Any]) -> Any:
    if len(passengers) != len(_reservation(db, reservation_id)["passengers"]):
        raise ToolError("the number of passengers cannot change")
    res = db.mut("reservations", reservation_id)
    res["passengers"] = list(passengers)
    return res


def send_certificate(db: Tables, user_id: str, amount: float) -> str:
    methods = db.mut("users", _user(db, user_id) and user_id)["payment_methods"]
    k = 1 + sum(1 for m in methods if m.startswith("certificate_"))
    cid = f"certificate_{hashlib.sha256(f'{user_id}|{k}'.encode()).hexdigest()[:7]}"
    methods[cid] = {"source": "certificate", "amount": amount, "id": cid}
    return f"Certificate {cid} added to user {user_id} with amount {amount}."


TOOLS: dict[str, Callable[..., Any]] = {
    f.__name__.lstrip("_"): f for f in (
        get_user_details, get_reservation_details, list_all_airports, search_direct_flight, search_onestop_flight,
        book_reservation, cancel_reservation, update_reservation_baggages, update_reservation_flights,
        update_reservation_passengers, send_certificate)
} | COMMON_TOOLS

_SEG = arr(obj({"flight_number": s("e.g. 'HAT001'."), "date": s("YYYY-MM-DD.")}), "Flight segments, in travel order.")
_PAX = arr(obj({"first_name": s("First name."), "last_name": s("Last name."), "dob": s("YYYY-MM-DD.")}), "Passengers.")
SCHEMAS: list[dict[str, Any]] = [
    fn("get_user_details", "The user's profile: payment methods, saved passengers, membership, reservations.",
       {"user_id": s("The user id, e.g. 'sara_doe_496'.")}),
    fn("get_reservation_details", "A reservation's flights, passengers, payments, bags, insurance.",
       {"reservation_id": s("Six characters, e.g. 'ZFA04Y'.")}),
    fn("list_all_airports", "Every airport code served."),
    fn("search_direct_flight", "Direct flights bookable on a date, with seats and prices per cabin.",
       {"origin": s("IATA code, e.g. 'JFK'."), "destination": s("IATA code."), "date": s("YYYY-MM-DD.")}),
    fn("search_onestop_flight", "One-stop connections bookable from a date.",
       {"origin": s("IATA code."), "destination": s("IATA code."), "date": s("YYYY-MM-DD.")}),
    fn("book_reservation", "Book a reservation (after the user confirms).",
       {"user_id": s("The user id."), "origin": s("IATA code."), "destination": s("IATA code."),
        "flight_type": s("'one_way' or 'round_trip'."), "cabin": s("'basic_economy', 'economy' or 'business'."),
        "flights": _SEG, "passengers": _PAX,
        "payment_methods": arr(obj({"payment_id": s("A profile payment method."), "amount": n("USD.")}), "Payments."),
        "total_baggages": n("Checked bags.", "integer"), "nonfree_baggages": n("Paid checked bags.", "integer"),
        "insurance": s("'yes' or 'no'.")}),
    fn("cancel_reservation", "Cancel a whole reservation; refunds go to the original payment methods.",
       {"reservation_id": s("The reservation id.")}),
    fn("update_reservation_baggages", "Add checked bags to a reservation.",
       {"reservation_id": s("The reservation id."), "total_baggages": n("New total.", "integer"),
        "nonfree_baggages": n("New paid total.", "integer"), "payment_id": s("Pays for the added paid bags.")}),
    fn("update_reservation_flights", "Change a reservation's flights or cabin (all segments, same cabin).",
       {"reservation_id": s("The reservation id."), "cabin": s("The cabin for every segment."), "flights": _SEG,
        "payment_id": s("A gift card or credit card that pays or receives the difference.")}),
    fn("update_reservation_passengers", "Replace a reservation's passengers (same number).",
       {"reservation_id": s("The reservation id."), "passengers": _PAX}),
    fn("send_certificate", "Send the user a travel certificate as a gesture.",
       {"user_id": s("The user id."), "amount": n("USD.")}),
    *COMMON_SCHEMAS,
]
