#!/usr/bin/env python3
"""Tests of the reference grant service: the cases of docs/integration.md with the schemas' examples, then every
result event the end-to-end tests captured from real workers (scripts/test.sh passes their directory).

    .deps/venv/bin/python examples/grant-service/test_grant_service.py [CAPTURE_DIR]
"""

import json
import pathlib
import sys
import unittest
from decimal import Decimal

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from grant_service import GrantService  # noqa: E402

SCHEMAS = HERE.parent.parent / "docs" / "schemas"
CAPTURE = None


def example(event_type, index=0, **changes):
    event = dict(json.loads((SCHEMAS / f"{event_type}.json").read_text())["examples"][index])
    event.update(changes)
    return {"ce_type": event_type, "ce_id": event["event_id"]}, json.dumps(event)


class Scenarios(unittest.TestCase):
    def setUp(self):
        self.service = GrantService(default_bundle_id="com.example.game")
        # The story of order ord-20261130-000481 in the schemas' examples.
        self.player = ("com.example.game", "player-77120", "coins_100")

    def balance(self, player=None):
        return self.service.balances.get(player or self.player, Decimal(0))

    def test_a_grant_credits_once_however_often_it_arrives(self):
        grant = example("receipt.granted")
        self.assertEqual(self.service.handle(*grant), "credited")
        self.assertEqual(self.service.handle(*grant), "duplicate")
        self.assertEqual(self.balance(), 1)

    def test_a_refund_before_its_grant_is_applied_when_the_grant_arrives(self):
        self.assertEqual(self.service.handle(*example("receipt.revoked")), "kept until the grant arrives")
        self.service.handle(*example("receipt.granted"))
        self.assertEqual(self.balance(), 0)

    def test_a_reversal_handled_before_the_refund_it_reverses_leaves_the_grant(self):
        self.service.handle(*example("receipt.granted"))
        self.service.handle(*example("receipt.reinstated"))  # notified 12-05, handled first
        self.service.handle(*example("receipt.revoked"))  # notified 12-02
        self.assertEqual(self.balance(), 1)

    USD, EUR = ("com.example.game", "USD"), ("com.example.game", "EUR")

    def net(self, key):
        return self.service.revenue.get(key, Decimal(0)) - self.service.refunds.get(key, Decimal(0))

    def test_revenue_by_app_and_currency_and_refunds_against_it_from_the_events_alone(self):
        self.service.handle(*example("receipt.granted"))  # revenue 990 USD milliunits
        self.service.handle(*example("receipt.granted"))  # the same event again: counted once
        self.service.handle(*example("receipt.renewed"))  # 4990 EUR
        # A refund of 40 %, then all of it: each event takes back the difference, as the worker computes it.
        self.service.handle(*example("receipt.revoked", revocation_percentage=40, revenue=-396))
        self.service.handle(*example("receipt.revoked", event_id="c1e2d3f4-0000-8000-8000-000000000001",
                                     revocation_percentage=100, revenue=-594))
        self.assertEqual(self.service.revenue[self.USD], Decimal("0.99"))
        self.assertEqual(self.service.revenue[self.EUR], Decimal("4.99"))
        self.assertEqual(self.service.refunds[self.USD], Decimal("0.99"))
        self.assertNotIn(self.EUR, self.service.refunds)

    def test_a_reversed_refund_gives_back_what_it_took_and_family_access_is_no_sale(self):
        self.service.handle(*example("receipt.granted"))
        self.service.handle(*example("receipt.revoked"))  # all of it: -990
        self.service.handle(*example("receipt.reinstated"))  # +990
        self.assertEqual(self.service.refunds[self.USD], Decimal(0))
        self.service.handle(*example("receipt.granted", event_id="f0000000-0000-8000-8000-000000000002",
                                     order_id="ord-family", in_app_ownership_type="FAMILY_SHARED", revenue=0))
        self.assertEqual(self.service.revenue[self.USD], Decimal("0.99"))

    def test_a_grant_without_a_price_counts_no_revenue(self):
        self.service.handle(*example("receipt.granted", price=None, currency=None, revenue=0))
        self.assertEqual(self.service.revenue, {})
        self.assertEqual(self.balance(), 1)

    def test_a_refunded_receipt_era_purchase_nets_zero_not_minus_its_price(self):
        # A job proved it with a receipt: no price, revenue 0. Apple's REFUND carries Apple's price, and the worker
        # says it takes back what the sale counted: nothing.
        self.service.handle(*example("receipt.granted", price=None, currency=None, revenue=0))
        self.service.handle(*example("receipt.revoked", price=1990, currency="USD", revenue=0))
        self.assertEqual(self.net(self.USD), Decimal(0))
        self.assertEqual(self.balance(), 0)

    def test_a_testers_sandbox_purchase_is_no_revenue(self):
        self.service.handle(*example("receipt.granted", environment="Sandbox", price=9990, revenue=0))
        self.service.handle(*example("receipt.renewed", environment="Sandbox", revenue=0))
        self.service.handle(*example("receipt.unclaimed", environment="Sandbox", revenue=0))
        self.assertEqual(self.net(self.USD), Decimal(0))
        self.assertEqual(self.net(self.EUR), Decimal(0))

    def test_a_credit_refunded_before_its_publish_nets_to_zero_once_it_arrives(self):
        token = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
        self.service.players[token] = "player-77120"
        gems = ("com.example.game", "player-77120", "gems_500")
        unclaimed = json.loads(example("receipt.unclaimed")[1])
        refund = example("receipt.revoked", order_id=unclaimed["order_id"], product_id="gems_500",
                         transaction_id=unclaimed["transaction_id"], currency=unclaimed["currency"],
                         price=unclaimed["price"], revenue=-unclaimed["revenue"])
        self.assertEqual(self.service.handle(*refund), "kept until the grant arrives")
        self.service.handle(*example("receipt.unclaimed"))
        self.assertEqual(self.balance(gems), 0)
        self.assertEqual(self.net(("com.example.game", unclaimed["currency"])), Decimal(0))

    def test_a_purchase_refunded_in_part_before_its_grant_counts_what_was_kept(self):
        # Three packs at 2.99; Apple refunded a third before any order held it. The grant, then its follow-up.
        self.service.handle(*example("receipt.granted", quantity=3, price=2990, revenue=2990))
        self.service.handle(*example("receipt.revoked", event_id="a0000000-0000-8000-8000-0000000000f1",
                                     quantity=3, revocation_percentage=33.333, revocation_type="REFUND_PRORATED",
                                     notification_id=None, price=2990, revenue=-997))
        self.assertEqual(self.balance(), Decimal("2.00001"))
        self.assertEqual(self.net(self.USD), Decimal("1.993"))

    def test_a_credit_and_the_job_tied_to_it_count_once_whichever_comes_first(self):
        unclaimed = example("receipt.unclaimed")
        credit = json.loads(unclaimed[1])
        tied = example("receipt.granted", event_id=credit["event_id"], order_id="shop-9", product_id="gems_500",
                       price=None, currency=credit["currency"], revenue=credit["revenue"])
        self.service.handle(*tied)
        self.service.handle(*unclaimed)
        self.assertEqual(self.service.revenue[("com.example.game", credit["currency"])],
                         Decimal(credit["revenue"]) / 1000)

    def test_events_of_a_release_before_revenue_are_counted_from_their_price(self):
        def old(event_type, **changes):
            headers, value = example(event_type, **changes)
            event = json.loads(value)
            del event["revenue"]
            return headers, json.dumps(event)
        self.service.handle(*old("receipt.granted"))
        self.service.handle(*old("receipt.granted", event_id="f0000000-0000-8000-8000-000000000003",
                                 order_id="ord-sandbox", environment="Sandbox"))
        self.service.handle(*old("receipt.revoked", revocation_percentage=40))
        self.service.handle(*old("receipt.revoked", event_id="c1e2d3f4-0000-8000-8000-000000000004",
                                 revocation_percentage=100))
        self.assertEqual(self.service.revenue[self.USD], Decimal("0.99"))
        self.assertEqual(self.service.refunds[self.USD], Decimal("0.99"))

    def test_a_prorated_refund_takes_back_its_share(self):
        self.service.handle(*example("receipt.granted", quantity=10))
        self.service.handle(*example("receipt.revoked", quantity=10, revocation_percentage=40,
                                     revocation_type="REFUND_PRORATED"))
        self.assertEqual(self.balance(), 6)

    def test_refunded_reversed_and_refunded_again_ends_refunded(self):
        self.service.handle(*example("receipt.granted"))
        self.service.handle(*example("receipt.revoked"))
        self.assertEqual(self.service.handle(*example("receipt.reinstated")), "credited back")
        self.assertEqual(self.balance(), 1)
        again = example("receipt.revoked", notified_at="2026-12-09T08:00:00.000Z",
                        event_id="7d0e5a4b-1c2d-8e3f-9a4b-5c6d7e8f9a0b")
        self.service.handle(*again)
        self.assertEqual(self.balance(), 0)

    def test_a_deny_after_the_grant_changes_nothing(self):
        self.service.handle(*example("receipt.granted"))
        headers, value = example("receipt.denied", order_id="ord-20261130-000481", reason="revoked",
                                 event_id="0b7c3a1e-5d2f-8a4b-9c6d-1e2f3a4b5c6d")
        self.assertEqual(self.service.handle(headers, value), "no change (already granted)")
        self.assertEqual(self.balance(), 1)

    def test_order_already_fulfilled_before_its_grant_leaves_the_order_to_the_grant(self):
        headers, value = example("receipt.denied", order_id="ord-20261130-000481", reason="order_already_fulfilled",
                                 event_id="0b7c3a1e-5d2f-8a4b-9c6d-1e2f3a4b5c6d")
        self.assertEqual(self.service.handle(headers, value), "waiting for the grant")
        self.assertEqual(self.service.handle(*example("receipt.granted")), "credited")
        self.assertEqual(self.balance(), 1)

    def test_unknown_types_and_fields_are_ignored_not_failed(self):
        headers, value = example("receipt.granted", field_added_later={"x": 1})
        self.assertEqual(self.service.handle(headers, value), "credited")
        later = ({"ce_type": "receipt.gifted", "ce_id": "9f1e2d3c-4b5a-8c6d-8e7f-0a1b2c3d4e5f"},
                 json.dumps({"event_id": "9f1e2d3c-4b5a-8c6d-8e7f-0a1b2c3d4e5f", "order_id": "o"}))
        self.assertEqual(self.service.handle(*later), "ignored")

    def test_a_rescinded_consent_names_the_download_and_changes_no_balance(self):
        self.service.handle(*example("receipt.granted"))
        headers, value = example("receipt.consent_rescinded")
        self.assertEqual(self.service.handle(headers, value), "consent rescinded")
        event = json.loads(value)
        self.assertIn((event["bundle_id"], event["app_transaction_id"]), self.service.consent_rescinded)
        self.assertEqual(self.balance(), 1)
        self.assertEqual(self.service.handle(headers, value), "duplicate")

    def test_an_extension_that_failed_keeps_the_subscription_as_it_was_and_the_summary_counts(self):
        self.service.handle(*example("receipt.renewal_changed"))
        before = dict(self.service.subscriptions[("com.example.game", "2000000800000017")])
        outcome = self.service.handle(*example("receipt.extension_failed"))
        self.assertEqual(outcome, "subscription active until 2027-01-01T09:00:00.000Z")
        self.assertEqual(self.service.subscriptions[("com.example.game", "2000000800000017")]["expires_at"],
                         before["expires_at"])
        headers, value = example("receipt.extension_completed")
        self.assertEqual(self.service.handle(headers, value), "extension completed: 5 extended, 2 not")
        self.assertEqual(self.service.extensions[("com.example.game", "efb27071-45a4-4aca-9854-2a1e9146f265")],
                         {"product_id": "vip_monthly", "succeeded": 5, "failed": 2})
        self.assertEqual(self.service.handle(headers, value), "duplicate")

    def test_a_player_erased_keeps_the_orders_under_the_pseudonym_and_forgets_the_tokens(self):
        self.service.handle(*example("receipt.granted"))
        self.service.players["5b2f3c3e-1d4e-4c2a-9a8b-7c6d5e4f3a2b"] = "player-77120"
        headers, value = example("player.erased")
        self.assertEqual(self.service.handle(headers, value), "player erased: 1 orders now erased-3f9a0c1d2b4e5f60718293a4")
        self.assertNotIn("player-77120", {order.user_id for order in self.service.orders.values()})
        self.assertEqual(self.service.players, {})
        self.assertEqual(self.service.handle(headers, value), "duplicate")

    def test_two_games_with_one_order_id_and_one_player_id_are_apart(self):
        self.service.handle(*example("receipt.granted"))
        other = "3c2b1a09-8f7e-8d6c-b5a4-f3e2d1c0b9a8"
        self.service.handle(*example("receipt.granted", bundle_id="com.example.other", event_id=other))
        self.service.handle(*example("receipt.revoked", bundle_id="com.example.other"))
        self.assertEqual(self.balance(), 1)
        self.assertEqual(self.balance(("com.example.other", "player-77120", "coins_100")), 0)

    def test_an_event_stored_before_bundle_id_is_the_default_apps(self):
        headers, value = example("receipt.granted")
        event = json.loads(value)
        del event["bundle_id"]
        self.service.handle(headers, json.dumps(event))
        self.service.handle(*example("receipt.revoked"))
        self.assertEqual(self.balance(), 0)
        self.assertEqual(len(self.service.orders), 1)

    def test_a_refund_request_gives_the_answer_to_send(self):
        self.service.handle(*example("receipt.granted"))
        self.service.handle(*example("receipt.consumption_requested"))
        request = self.service.orders[("com.example.game", "ord-20261130-000481")].consumption_request
        self.assertEqual(request["answer"]["transaction_id"], "2000000812345678")
        self.assertEqual(request["answer"]["delivery_status"], "DELIVERED")


    def test_an_unclaimed_purchase_is_credited_to_its_token_player_then_tied_to_the_late_job(self):
        token = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
        self.service.players[token] = "player-77120"
        gems = ("com.example.game", "player-77120", "gems_500")
        unclaimed = example("receipt.unclaimed")
        self.assertEqual(self.service.handle(*unclaimed), "credited (unclaimed)")
        self.assertEqual(self.balance(gems), 1)
        # The job that comes later: a receipt.granted for its own order with the credit's event_id.
        credit_id = json.loads(unclaimed[1])["event_id"]
        tied = example("receipt.granted", event_id=credit_id, order_id="shop-7", product_id="gems_500",
                       transaction_id="2000000812700044")
        self.assertEqual(self.service.handle(*tied), "tied to the unclaimed credit")
        self.assertEqual(self.balance(gems), 1)
        # Its refund names the job's order, and takes the credit back.
        self.service.handle(*example("receipt.revoked", order_id="shop-7", product_id="gems_500",
                                     transaction_id="2000000812700044"))
        self.assertEqual(self.balance(gems), 0)

    def test_an_unclaimed_purchase_of_an_unknown_token_waits_for_its_job(self):
        unclaimed = example("receipt.unclaimed")
        self.assertEqual(self.service.handle(*unclaimed), "kept for support")
        credit_id = json.loads(unclaimed[1])["event_id"]
        late = example("receipt.granted", event_id=credit_id, order_id="shop-8", product_id="gems_500")
        self.assertEqual(self.service.handle(*late), "credited")
        self.assertEqual(self.balance(("com.example.game", "player-77120", "gems_500")), 1)

    def test_a_subscription_is_entitled_from_its_events_in_any_order(self):
        renewed = example("receipt.renewed")
        changed = example("receipt.renewal_changed")  # notified 12-12
        issue = example("receipt.billing_issue")  # notified 01-01, grace period until 01-17
        expired = example("receipt.expired", notified_at="2027-01-17T09:00:03.551Z", status="expired")
        for event in (issue, renewed, changed):
            self.service.handle(*event)
        original = "2000000800000017"
        self.assertTrue(self.service.entitled("com.example.game", original, "2027-01-10T00:00:00.000Z"))
        self.service.handle(*expired)
        self.assertFalse(self.service.entitled("com.example.game", original, "2027-01-10T00:00:00.000Z"))
        self.assertEqual(self.service.subscriptions[("com.example.game", original)]["expires_at"],
                         "2027-01-01T09:00:00.000Z")


@unittest.skipIf(CAPTURE is None and len(sys.argv) < 2, "no capture directory (scripts/test.sh passes one)")
class RealEvents(unittest.TestCase):
    def test_every_captured_result_is_handled_and_handling_them_again_changes_nothing(self):
        records = []
        for path in sorted(pathlib.Path(CAPTURE).glob("*.jsonl")):
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                record = json.loads(line) if line.strip() else {}
                if record.get("channel") == "results":
                    records.append(record)
        self.assertGreater(len(records), 100, "the end-to-end tests publish hundreds of results")
        service = GrantService()
        outcomes = [service.handle(record["headers"], record["value"]) for record in records]
        kinds = {record["headers"]["ce_type"] for record in records}
        self.assertTrue({"receipt.granted", "receipt.denied", "receipt.revoked"} <= kinds, kinds)
        self.assertEqual(service.ignored_types, set())
        balances = dict(service.balances)
        # What each order gave: never more than its quantity, never less than nothing; all of it while no refund
        # or reversal was heard of.
        for key, order in service.orders.items():
            self.assertTrue(0 <= order.credited <= order.quantity, (key, order))
            if order.granted and not order.changes:
                self.assertEqual(order.credited, order.quantity, key)
        again = [service.handle(record["headers"], record["value"]) for record in records]
        self.assertEqual(set(again), {"duplicate"})
        self.assertEqual(service.balances, balances)
        print(f"reference grant service: {len(records)} real result events, "
              f"{sum(o.startswith('credited') for o in outcomes)} credited, {outcomes.count('taken back')} taken back",
              file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        CAPTURE = sys.argv.pop(1)
    unittest.main()
