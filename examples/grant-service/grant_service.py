#!/usr/bin/env python3
"""A reference grant service: what docs/integration.md says, as code a team can read in five minutes.

It applies the events of the results topic to players' balances, exactly once per event, in whatever order they
arrive, and keeps what it needs to answer consumption requests. It has no Kafka client on purpose: wire
`GrantService.handle(headers, value)` to yours (confluent-kafka, franz-go, Spring Kafka, ...), call it for each
record, and commit the record's offset after it returns (at least once: a record handled twice changes nothing).
State lives in memory here; a real service keeps `orders`, `seen` and `balances` in its own database, updated in
the transaction that credits the player. Amounts are exact decimals (a 40 % refund of one pack takes back 0.4);
round as your economy does.

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

    granted: bool = False
    product_id: str = ""
    quantity: int = 0
    user_id: str = ""
    transaction_id: str = ""
    last_deny: str = ""  # the reason of the newest deny, for the order service (it decides when to give up)
    # The purchase's refunds and reversals, by Apple's time (notified_at): the newest says whether it is revoked
    # now, whatever order they arrived in (a reversal can be handled before the refund it reverses).
    changes: list = dataclasses.field(default_factory=list)  # (notified_at, "revoked" | "reinstated", units)
    credited: Decimal = Decimal(0)  # what this order gave the player so far
    consumption_request: dict | None = None  # an open refund request: what to answer, and by when


class GrantService:
    # Deny reasons after which another job with the same proof will not grant (docs/integration.md, "An order's
    # life"). The order service may still send a new job with another proof for the same order.
    FINAL_FOR_THE_PROOF = {"invalid_receipt", "bundle_mismatch", "sandbox_not_allowed", "transaction_not_found",
                           "product_mismatch", "quantity_mismatch", "account_mismatch", "revoked", "expired",
                           "duplicate_transaction", "malformed_job"}

    def __init__(self, default_bundle_id: str = "com.example", players: dict[str, str] | None = None):
        # Events without bundle_id are the default app's (apple.bundle_id): stored before events carried it, or
        # the deny of a malformed job (which changes no balance).
        self.default_bundle_id = default_bundle_id
        self.orders: dict[tuple[str, str], Order] = {}
        self.seen: set[str] = set()  # event ids applied (kept as long as the orders: grant ids never expire)
        self.balances: dict[tuple[str, str, str], Decimal] = {}  # (bundle_id, user_id, product_id) -> units
        self.ignored_types: set[str] = set()
        # appAccountToken -> user_id: the game sets one token per player at purchase time and keeps this mapping
        # (docs/integration.md, "Purchases no job claimed").
        self.players: dict[str, str] = dict(players or {})
        # receipt.unclaimed credited: event_id -> the order key it was credited under, until a job ties it.
        self.credits: dict[str, tuple[str, str]] = {}
        # Unclaimed purchases whose token names no known player, by event_id: for support, until a job claims one.
        self.unmapped: dict[str, dict] = {}
        # Subscriptions (bundle_id, original_transaction_id) -> the newest state applied (by notified_at).
        self.subscriptions: dict[tuple[str, str], dict] = {}
        # Downloads (bundle_id, app_transaction_id) whose parent withdrew consent: the game ends their sessions and
        # stops processing what it keeps under that consent (docs/integration.md, "A parent withdraws consent").
        self.consent_rescinded: set[tuple[str, str]] = set()
        # Support's extensions of every subscriber of a product after an outage, by (bundle_id, request_identifier):
        # Apple's final counts (each subscription extended came as receipt.renewal_changed, each not as
        # receipt.extension_failed).
        self.extensions: dict[tuple[str, str], dict] = {}
        # What the purchases earned, from the events alone (docs/contract.md section 4, "Revenue"), in units of each
        # currency: sales by (bundle_id, currency), and what refunds took back (reversals give it back).
        self.revenue: dict[tuple[str, str], Decimal] = {}
        self.refunds: dict[tuple[str, str], Decimal] = {}
        self._counted: set[str] = set()  # event ids counted (a credit and the job tied to it: one event id, once)
        # For events of a release before `revenue` only: what each sale counted, by (bundle, transaction), and what
        # its refunds took back so far.
        self._sales: dict[tuple[str, str], Decimal] = {}
        self._taken: dict[tuple[str, str], Decimal] = {}

    def handle(self, headers: dict, value: bytes | str) -> str:
        """Applies one record of the results topic; returns what it did (for logs and tests)."""
        event_type = headers.get("ce_type")
        event = json.loads(value)
        event_id = event.get("event_id") or headers.get("ce_id")
        if event_id in self.seen or (event_type == "receipt.unclaimed" and event_id in self.unmapped):
            if event_type == "receipt.granted" and event_id in self.credits:
                return self._tie(event)  # the job of a purchase credited unclaimed: its order takes the credit
            return "duplicate"  # a re-delivered job, a notification handled again, a replay: applied once
        handler = {
            "receipt.granted": self._granted,
            "receipt.denied": self._denied,
            "receipt.revoked": self._changed,
            "receipt.reinstated": self._changed,
            "receipt.consumption_requested": self._consumption_requested,
            "receipt.unclaimed": self._unclaimed,
            "receipt.renewed": self._subscription,
            "receipt.expired": self._subscription,
            "receipt.billing_issue": self._subscription,
            "receipt.renewal_changed": self._subscription,
            # Apple could not extend this one (the others got the days): its state as it was.
            "receipt.extension_failed": self._subscription,
        }.get(event_type)
        if event_type == "receipt.consent_rescinded":
            # No order: Apple names the download. The game maps app_transaction_id to its player at sign-in.
            self.consent_rescinded.add((event.get("bundle_id") or self.default_bundle_id, event["app_transaction_id"]))
            outcome = "consent rescinded"
        elif event_type == "player.erased":
            outcome = self._erase(event)
        elif event_type == "receipt.extension_completed":
            # No order: Apple names the request. For the studio's dashboard: how the amends went.
            key = (event.get("bundle_id") or self.default_bundle_id, event["request_identifier"])
            self.extensions[key] = {"product_id": event.get("product_id"), "succeeded": event.get("succeeded_count"),
                                    "failed": event.get("failed_count")}
            outcome = f"extension completed: {event.get('succeeded_count')} extended, {event.get('failed_count')} not"
        elif handler is None:
            self.ignored_types.add(event_type)  # a type added by a later release: ignore it, never fail
            outcome = "ignored"
        else:
            key = (event.get("bundle_id") or self.default_bundle_id, event["order_id"])
            order = self.orders.setdefault(key, Order())
            outcome = handler(order, event)
            self._settle(key[0], order)
        if outcome != "kept for support":  # an unmapped credit is credited by the job that claims it later
            self.seen.add(event_id)
        self._count_money(event_type, event)
        return outcome

    SALES = ("receipt.granted", "receipt.renewed", "receipt.unclaimed")

    def _count_money(self, event_type: str, event: dict):
        """Indicative revenue and refunds by app and currency, for dashboards (gross; Apple: reconcile with App Store
        Connect's financial reports). Each event says what it adds: `revenue`, in milliunits of `currency` (a sale
        its price, nothing for a tester's purchase, a family member's access or a receipt without a price; a refund
        minus its share of what the sale counted; a reversal what the refunds took, back). Counted once per
        event_id. An event of a release before `revenue` has none: `_count_without_revenue` then."""
        if event_type not in self.SALES + ("receipt.revoked", "receipt.reinstated"):
            return
        if event_type in self.SALES and event.get("decision", "grant") != "grant":
            return
        if event["event_id"] in self._counted:
            return  # a credit and the job tied to it share one event_id, and say the same revenue
        self._counted.add(event["event_id"])
        bundle = event.get("bundle_id") or self.default_bundle_id
        currency = event.get("currency")
        amount = event.get("revenue")
        if amount is None:
            amount = self._count_without_revenue(event_type, event, bundle)
            if amount is None:
                return
        if not currency or not amount:
            if event_type in self.SALES and currency:  # a sale worth nothing here still opens its currency's row
                self.revenue.setdefault((bundle, currency), Decimal(0))
            return
        value = Decimal(amount) / 1000
        if event_type in self.SALES:
            self._sales[(bundle, event["transaction_id"])] = value
            self.revenue[(bundle, currency)] = self.revenue.get((bundle, currency), Decimal(0)) + value
        else:  # a refund (negative) or its reversal (positive)
            self.refunds[(bundle, currency)] = self.refunds.get((bundle, currency), Decimal(0)) - value

    def _count_without_revenue(self, event_type: str, event: dict, bundle: str) -> int | None:
        """What an event without `revenue` (a release before it, or a refund of a grant that release recorded)
        adds, in milliunits, from this service's own memory of the sale: a sale counts a Production price (not a
        family member's access); a refund takes its share of the sale this service counted, less earlier refunds;
        a reversal gives back what they took."""
        price, purchase = event.get("price"), (bundle, event.get("transaction_id"))
        if event_type in self.SALES:
            if price is None or event.get("environment") != "Production":
                return None
            if event.get("in_app_ownership_type") == "FAMILY_SHARED":
                return None
            return int(price)
        sale = self._sales.get(purchase)
        if sale is None:
            return None  # a sale this service never counted: nothing to take back
        before = self._taken.get(purchase, Decimal(0))
        if event_type == "receipt.reinstated":
            self._taken[purchase] = Decimal(0)
            return int(before * 1000)
        share = event.get("revocation_percentage")
        now = max(sale if share is None else sale * Decimal(str(share)) / 100, before)
        self._taken[purchase] = now
        return -int((now - before) * 1000)

    def _settle(self, bundle_id: str, order: Order):
        """Credits or debits the difference between what the order should have given and what it gave: the
        same whatever order the events came in."""
        target = Decimal(order.quantity) if order.granted else Decimal(0)
        if order.granted and order.changes:
            _, kind, units = max(order.changes, key=lambda change: (change[0], change[1]))
            if kind == "revoked":
                target -= units  # may leave the player negative: they spent it; never fail the event
        delta = target - order.credited
        if delta:
            key = (bundle_id, order.user_id, order.product_id)
            self.balances[key] = self.balances.get(key, Decimal(0)) + delta
            order.credited = target

    def _granted(self, order: Order, event) -> str:
        self.unmapped.pop(event["event_id"], None)  # the job of an unclaimed purchase no player was known for
        if order.granted:
            return "already granted"  # an order has one grant id; be safe anyway
        order.granted = True
        order.user_id, order.product_id = event["user_id"], event["product_id"]
        order.quantity, order.transaction_id = event["quantity"], event["transaction_id"]
        # Credit it even if the order service gave up on the order: the player paid, and this purchase is bound
        # to this order for good.
        return "credited" if not order.changes else "credited (a refund or reversal arrived first)"

    def _denied(self, order: Order, event) -> str:
        if order.granted:
            return "no change (already granted)"  # e.g. order_already_fulfilled, or a replay of a refunded proof
        order.last_deny = event["reason"]
        if event["reason"] == "order_already_fulfilled":
            return "waiting for the grant"  # the order's receipt.granted is on its way (same partition, any time)
        return "denied (final for this proof)" if event["reason"] in self.FINAL_FOR_THE_PROOF else "denied"

    def _changed(self, order: Order, event) -> str:
        if event["type"] == "receipt.revoked":
            percentage = event.get("revocation_percentage")
            quantity = Decimal(event["quantity"])
            units = quantity if percentage is None else quantity * Decimal(str(percentage)) / 100
            order.changes.append((event["notified_at"], "revoked", units))
        else:
            order.changes.append((event["notified_at"], "reinstated", Decimal(0)))
        if not order.granted:
            order.quantity, order.user_id, order.product_id = event["quantity"], event["user_id"], event["product_id"]
            return "kept until the grant arrives"
        return "taken back" if event["type"] == "receipt.revoked" else "credited back"

    def _unclaimed(self, order: Order, event) -> str:
        """A purchase no job claimed in time: credit the player its app_account_token names."""
        player = self.players.get(event.get("app_account_token") or "")
        if player is None:
            self.unmapped[event["event_id"]] = event  # no known player: keep it; the job that comes later credits it
            return "kept for support"
        order.granted = True
        order.user_id, order.product_id = player, event["product_id"]
        order.quantity, order.transaction_id = event["quantity"], event["transaction_id"]
        self.credits[event["event_id"]] = (event.get("bundle_id") or self.default_bundle_id, event["order_id"])
        return "credited (unclaimed)"

    def _tie(self, event) -> str:
        """A job's grant carrying an unclaimed credit's event_id: nothing to credit again; the job's order takes the
        credited order's state, so the purchase's later refunds (keyed by the job's order) debit the player."""
        old_key = self.credits.pop(event["event_id"])
        new_key = (event.get("bundle_id") or self.default_bundle_id, event["order_id"])
        if old_key in self.orders and new_key not in self.orders:
            self.orders[new_key] = self.orders.pop(old_key)
        return "tied to the unclaimed credit"

    def _subscription(self, order: Order, event) -> str:
        """A subscription's event carries its state after the notification: keep the newest (by notified_at; the
        worker already drops older changes, this only guards a replay). A pass that credits per period would
        credit on receipt.renewed here, once per event_id."""
        key = (event.get("bundle_id") or self.default_bundle_id, event["original_transaction_id"])
        last = self.subscriptions.get(key)
        if last is None or event["notified_at"] >= last["notified_at"] or event["type"] == "receipt.renewed":
            newest = event if last is None or event["notified_at"] >= last["notified_at"] else last
            expires = max(filter(None, [event.get("expires_at"), (last or {}).get("expires_at")]), default=None)
            self.subscriptions[key] = {"notified_at": newest["notified_at"], "status": newest["status"],
                                       "expires_at": expires, "grace_period_expires_at": newest["grace_period_expires_at"],
                                       "order_id": event["order_id"], "user_id": event["user_id"]}
        state = self.subscriptions[key]
        return f"subscription {state['status']} until {state['expires_at']}"

    def _erase(self, event) -> str:
        """A player forgotten (docs/contract.md section 11): their orders keep what was credited (the balances must
        still add up) under the ledger's pseudonym instead of their id; their app account tokens are forgotten."""
        bundle = event.get("bundle_id") or self.default_bundle_id
        user, pseudonym = event["user_id"], event["pseudonym"]
        orders = [order for (app, _), order in self.orders.items() if app == bundle and order.user_id == user]
        for order in orders:
            order.user_id = pseudonym
        for state in self.subscriptions.values():
            if state.get("user_id") == user:
                state["user_id"] = pseudonym
        for token in [token for token, player in self.players.items() if player == user]:
            del self.players[token]
        return f"player erased: {len(orders)} orders now {pseudonym}"

    def entitled(self, bundle_id: str, original_transaction_id: str, now: str) -> bool:
        """Whether a subscription entitles its player at `now` (RFC 3339, UTC): active or in a grace period, and
        before its end."""
        state = self.subscriptions.get((bundle_id, original_transaction_id))
        if state is None:
            return False
        if state["status"] == "grace_period":
            return now < (state["grace_period_expires_at"] or "")
        return state["status"] == "active" and now < (state["expires_at"] or "")

    def _consumption_requested(self, order: Order, event) -> str:
        # What to produce to topics.consumption (key: transaction_id) before respond_by, if the player consented
        # to share it: here, how much of the purchase is still unspent is the game's to say; the reference sends
        # the facts it has.
        order.consumption_request = {
            "respond_by": event["respond_by"],
            "answer": {"transaction_id": event["transaction_id"], "customer_consented": True,
                       "sample_content_provided": False,
                       "delivery_status": "DELIVERED" if order.granted else "UNDELIVERED_OTHER",
                       "bundle_id": event.get("bundle_id")},
        }
        return "consumption request to answer"


def main(paths):
    service = GrantService()
    for path in paths:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                record = json.loads(line)
                if record.get("channel") == "results":
                    print(service.handle(record["headers"], record["value"]))
    for (bundle, user, product), units in sorted(service.balances.items()):
        print(f"balance {bundle} {user} {product} {units}")
    for (bundle, currency), amount in sorted(service.revenue.items()):
        refunded = service.refunds.get((bundle, currency), Decimal(0))
        print(f"revenue {bundle} {currency} {amount} refunded {refunded} net {amount - refunded}")


if __name__ == "__main__":
    main(sys.argv[1:])
