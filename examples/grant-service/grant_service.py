#!/usr/bin/env python3
"""A reference grant service: what docs/integration.md says, as code a team can read in five minutes.

It applies the events of the results topic to players' balances, exactly once per event, in whatever order they
arrive, and keeps what it needs to answer consumption requests. It has no Kafka client on purpose: wire
`GrantService.handle(headers, value)` to yours (confluent-kafka, franz-go, Spring Kafka, ...), call it for each
record, and commit the record's offset after it returns (at least once: a record handled twice changes nothing).
State lives in memory here; a real service keeps `orders`, `seen` and `balances` in its own database, updated in
the transaction that credits the player.

    python3 examples/grant-service/grant_service.py FILE.jsonl...   # replays captured records, prints balances

A record in FILE.jsonl is {"channel": "results", "key": ..., "headers": {...}, "value": "<JSON text>"} (the test
capture format; other channels are skipped).
"""

import dataclasses
import json
import sys
from decimal import Decimal


@dataclasses.dataclass
class Order:
    """What the grant service knows of one order (app, order_id)."""

    state: str = "open"  # open -> granted (-> revoked -> granted again ...); failed only by the order service's choice
    product_id: str = ""
    quantity: int = 0
    user_id: str = ""
    transaction_id: str = ""
    last_deny: str = ""  # the reason of the newest deny, for the order service (it decides when to give up)
    # A revocation that arrived before the grant it revokes (answers are unordered): applied when the grant comes.
    pending_revocation: Decimal | None = None
    revoked_units: Decimal = Decimal(0)
    open_consumption_request: str | None = None  # respond_by of a refund request not answered yet


class GrantService:
    # Deny reasons after which another job with the same proof can never grant (docs/integration.md, "An order's
    # life"). The order service may still send a new job with another proof for the same order.
    FINAL_FOR_THE_PROOF = {"invalid_receipt", "bundle_mismatch", "sandbox_not_allowed", "product_mismatch",
                           "quantity_mismatch", "account_mismatch", "revoked", "expired", "duplicate_transaction",
                           "malformed_job"}

    def __init__(self):
        self.orders: dict[tuple[str, str], Order] = {}
        self.seen: set[str] = set()  # event ids applied (kept as long as the orders: grant ids never expire)
        self.balances: dict[tuple[str, str], Decimal] = {}  # (user_id, product_id) -> units credited
        self.ignored_types: set[str] = set()

    def handle(self, headers: dict, value: bytes | str) -> str:
        """Applies one record of the results topic; returns what it did (for logs and tests)."""
        event_type = headers.get("ce_type")
        event = json.loads(value)
        event_id = event.get("event_id") or headers.get("ce_id")
        if event_id in self.seen:
            return "duplicate"  # a re-delivered job, a notification handled again, a replay: applied once
        handler = {
            "receipt.granted": self._granted,
            "receipt.denied": self._denied,
            "receipt.revoked": self._revoked,
            "receipt.reinstated": self._reinstated,
            "receipt.consumption_requested": self._consumption_requested,
        }.get(event_type)
        if handler is None:
            self.ignored_types.add(event_type)  # a type added by a later release: ignore it, never fail
            outcome = "ignored"
        else:
            outcome = handler(event)
        self.seen.add(event_id)
        return outcome

    def _order(self, event) -> Order:
        # Orders are per app: two games may both have an order "1" (bundle_id is null only on a malformed job's deny).
        return self.orders.setdefault((event.get("bundle_id") or "", event["order_id"]), Order())

    def _credit(self, order: Order, units: Decimal):
        key = (order.user_id, order.product_id)
        self.balances[key] = self.balances.get(key, Decimal(0)) + units

    def _granted(self, event) -> str:
        order = self._order(event)
        if order.state == "granted" or order.state == "revoked":
            return "already granted"  # another event id for the same order cannot happen; be safe anyway
        order.state = "granted"
        order.user_id, order.product_id = event["user_id"], event["product_id"]
        order.quantity, order.transaction_id = event["quantity"], event["transaction_id"]
        self._credit(order, Decimal(order.quantity))
        if order.pending_revocation is not None:  # the refund overtook the grant
            self._take_back(order, order.pending_revocation)
            order.pending_revocation = None
            return "credited, then revoked (the revocation arrived first)"
        return "credited"

    def _denied(self, event) -> str:
        order = self._order(event)
        if order.state != "open":
            return "no change (already granted)"  # e.g. order_already_fulfilled, published before the grant
        order.last_deny = event["reason"]
        if event["reason"] == "order_already_fulfilled":
            return "waiting for the grant"  # the order's receipt.granted is on its way (same partition, any time)
        return "denied (final for this proof)" if event["reason"] in self.FINAL_FOR_THE_PROOF else "denied"

    def _revocation_units(self, event) -> Decimal:
        percentage = event.get("revocation_percentage")
        quantity = Decimal(event["quantity"])
        return quantity if percentage is None else quantity * Decimal(str(percentage)) / 100

    def _take_back(self, order: Order, units: Decimal):
        # A prorated refund followed by a full one: take back only what was not taken yet.
        units = min(units, Decimal(order.quantity) - order.revoked_units)
        self._credit(order, -units)  # may go negative: the player spent it; never fail the event
        order.revoked_units += units
        order.state = "revoked"

    def _revoked(self, event) -> str:
        order = self._order(event)
        units = self._revocation_units(event)
        if order.state == "open":
            order.pending_revocation = units
            order.quantity = event["quantity"]
            return "revocation kept until the grant arrives"
        self._take_back(order, units)
        return "taken back"

    def _reinstated(self, event) -> str:
        order = self._order(event)
        if order.state != "revoked":
            order.pending_revocation = None  # the reversal of a refund that overtook the grant
            return "no change"
        self._credit(order, order.revoked_units)
        order.revoked_units = Decimal(0)
        order.state = "granted"
        return "credited back"

    def _consumption_requested(self, event) -> str:
        # Answer on topics.consumption before respond_by, keyed by transaction_id, with the player's consent.
        self._order(event).open_consumption_request = event["respond_by"]
        return "consumption request to answer"


def main(paths):
    service = GrantService()
    for path in paths:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                record = json.loads(line)
                if record.get("channel") == "results":
                    print(service.handle(record["headers"], record["value"]))
    for (user, product), units in sorted(service.balances.items()):
        print(f"balance {user} {product} {units}")


if __name__ == "__main__":
    main(sys.argv[1:])
