#!/usr/bin/env python3
"""An order service's side: send a purchase's proof to receipt-worker as a job (docs/contract.md, section 2).

    python3 send_job.py CLIENT_PROPERTIES ORDER_ID USER_ID PRODUCT_ID SIGNED_TRANSACTION

CLIENT_PROPERTIES holds the Kafka client's settings, one KEY=VALUE a line (bootstrap.servers, and security.protocol,
sasl.* for a real cluster). Prints the job's job_id once the broker has it."""
import json
import os
import sys
import time
import uuid

from confluent_kafka import Producer

JOBS_TOPIC = "receipt-jobs"  # the worker's topics.jobs


def settings(path):
    lines = (line.strip() for line in open(path, encoding="utf-8"))
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def time_ordered_id():
    """A UUID of version 7 (RFC 9562): the time in milliseconds first, so ids sort by when they were made, which
    keeps a job nearly as cheap for the worker's ledger when it holds millions of grants as when it is empty.
    Python 3.14 has uuid.uuid7()."""
    value = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10), "big")
    value = value & ~(0xF << 76) | 0x7 << 76  # version 7
    value = value & ~(0x3 << 62) | 0x2 << 62  # variant 10
    return str(uuid.UUID(int=value))


def send_job(producer, order_id, user_id, product_id, signed_transaction):
    # A new job_id per submission; resending the same job (same id, same content) after a timeout is safe.
    job = {"job_id": time_ordered_id(), "order_id": order_id, "user_id": user_id, "product_id": product_id,
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
