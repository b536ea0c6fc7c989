#!/usr/bin/env python3
"""An order service's side: send a purchase's proof to receipt-worker as a job (docs/contract.md, section 2).

    python3 send_job.py CLIENT_PROPERTIES ORDER_ID USER_ID PRODUCT_ID SIGNED_TRANSACTION

CLIENT_PROPERTIES holds the Kafka client's settings, one KEY=VALUE a line (bootstrap.servers, and security.protocol,
sasl.* for a real cluster). Prints the job's job_id once the broker has it."""
import json
import sys
import uuid

from confluent_kafka import Producer

JOBS_TOPIC = "receipt-jobs"  # the worker's topics.jobs


def settings(path):
    lines = (line.strip() for line in open(path, encoding="utf-8"))
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def send_job(producer, order_id, user_id, product_id, signed_transaction):
    # A new job_id per submission; resending the same job (same id, same content) after a timeout is safe.
    job = {"job_id": str(uuid.uuid4()), "order_id": order_id, "user_id": user_id, "product_id": product_id,
           "signed_transaction": signed_transaction}
    failures = []
    producer.produce(JOBS_TOPIC, key=order_id, value=json.dumps(job),  # keyed by order: its events share a partition
                     on_delivery=lambda error, message: error and failures.append(error))
    producer.flush(30)  # wait for the broker's acknowledgement before telling the player "pending"
    if failures or len(producer) > 0:
        raise RuntimeError(f"the job for order {order_id} was not sent: {failures or 'timed out'}")
    return job["job_id"]


if __name__ == "__main__":
    config, order_id, user_id, product_id, signed_transaction = sys.argv[1:6]
    producer = Producer({**settings(config), "acks": "all", "enable.idempotence": True})
    print(send_job(producer, order_id, user_id, product_id, signed_transaction))
