#!/usr/bin/env python3
"""A grant service's side: read receipt-worker's result events and apply each once (docs/integration.md).

    python3 read_results.py CLIENT_PROPERTIES GROUP_ID [COUNT]

Prints one JSON line per event: what to do, and the event. Stops after COUNT events when given."""
import json
import sys

from confluent_kafka import Consumer, KafkaException

RESULTS_TOPIC = "receipt-results"  # the worker's topics.results


def settings(path):
    lines = (line.strip() for line in open(path, encoding="utf-8"))
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def action(event_type, event):
    player = event.get("user_id") or f"the player of token {event.get('app_account_token')}"
    units = f"{event.get('quantity')} {event.get('product_id')}"
    if event_type in ("receipt.granted", "receipt.unclaimed"):  # credit it, even for an order given up on
        return f"credit {units} to {player}"
    if event_type == "receipt.denied":  # the order stays open; its reason says whether this proof can ever pass
        return f"deny order {event['order_id']}: {event['reason']}"
    if event_type == "receipt.revoked":  # the share refunded IN ALL (null: all of it), even if already spent
        share = 100 if event["revocation_percentage"] is None else event["revocation_percentage"]
        return f"debit up to {share}% in all of {units} from {player}, less what this order's refunds took"
    if event_type == "receipt.reinstated":  # what the refunds took, not the whole purchase
        return f"credit back to {player} what order {event['order_id']}'s refunds took of {units}"
    return f"apply {event_type} as docs/integration.md says; ignore a type you do not know"


def main(config, group_id, count=None):
    consumer = Consumer({**settings(config), "group.id": group_id, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([RESULTS_TOPIC])
    applied = set()  # event ids: keep them with the orders, in the transaction that credits the player
    try:
        while count is None or count > 0:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            headers = {key: value.decode() for key, value in message.headers() or []}
            event, event_type = json.loads(message.value()), headers["ce_type"]  # CloudEvents headers
            if headers["ce_id"] != event["event_id"] or event.get("type", event_type) != event_type:
                raise ValueError(f"headers {headers} do not match event {event['event_id']}")
            if event["event_id"] not in applied:  # the same event may come twice: apply it once
                print(json.dumps({"action": action(event_type, event), "event": event}), flush=True)
                applied.add(event["event_id"])
                count = None if count is None else count - 1
            consumer.commit(message=message, asynchronous=False)  # after applying: at least once
    finally:
        consumer.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else None)
