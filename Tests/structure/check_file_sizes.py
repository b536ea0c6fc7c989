#!/usr/bin/env python3
"""Files past one screen: every Swift file of Sources/ over 300 lines or holding more than three top-level types
is split, or listed below with the reason it reads better whole. A new one fails this check until it is split or
given a reason here; a listed file that is back under both bounds fails it too, so the list stays true."""
import os
import re
import sys

MAX_LINES = 300
MAX_TYPES = 3

# Each file that stays past a bound, and why.
REASONS = {
    # One flow, one file: a job's path from its bytes to its answer reads top to bottom.
    "Sources/Flows/JobHandler.swift": "the job flow: intake, stored answer, Apple's verdict, checks, claim, answer",
    "Sources/Support/SupportDesk+Credit.swift": "support's credit: checks, hold or claim, Apple's token, the event",
    # The runtime's loop: what is taken, given a slot, handled and answered shares its state.
    "Sources/Runtime/ConsumerRuntime.swift": "the event loop: take, slot, handle, answer (commits, intake gate, "
    "publishing, liveness and metrics are files of their own)",
    "Sources/Runtime/GroupScheduler.swift": "the slots of every group and the byte budget under one lock",
    # Apple's verification steps in Apple's order, as Apple's own library keeps them.
    "Sources/AppleVerification/SignedData/SignedDataVerifier.swift": "a JWS from its header to a verified payload, "
    "in the order of Apple's SignedDataVerifier",
    # Tables: one line a row, grep-able, in one place.
    "Sources/Configuration/ConfigurationKeys.swift": "every configuration key with its default and check, one table",
    "Sources/Ledger/Engine/LedgerQueries.swift": "the decision and result statements, written once for both databases",
    "Sources/Ledger/Engine/DeskQueries.swift": "the desk's statements (sessions, audit, caps, approvals)",
    "Sources/Ledger/Engine/PurchaseStatements.swift": "a purchase's state statements (grants, refunds, subscriptions)",
    "Sources/DeskService/Actions/DeskActions.swift": "the desk's actions by role, each a few lines over the store",
    # A type and the few small values only it speaks in.
    "Sources/Flows/ReceiptJob.swift": "the job, its identity and fields, and its one parser",
    "Sources/ReceiptWorker/DeskProcess.swift": "the desk's process: assembly, its server and readiness",
    "Sources/Configuration/ConfigurationKey.swift": "a key, the draft it fills, a value and the error naming the key",
    "Sources/Ledger/LedgerMigrations.swift": "the migrations' list and the words a schema change may use",
    "Sources/DeskService/OIDC/TokenVerifier.swift": "the sign-in token's checks, their refusal and result",
    "Sources/DeskService/OIDC/SignInProvider.swift": "the provider's calls, their two failures, its form encoding",
    "Sources/LedgerDomain/Rules/ClaimFacts.swift": "the grant and refund facts a claim is decided on",
    "Sources/Ledger/Engine/SQLSession.swift": "a session and the statement, value and row it speaks in",
    "Sources/Observability/Tracing/Span.swift": "a span, its context, kind, values and tracer (OpenTelemetry's model)",
    "Sources/Observability/Tracing/TraceIDs.swift": "a trace's and a span's ids and the generator that draws them",
    "Sources/DeskService/Session/ConsoleSession.swift": "a console session: the agent, the sign-in state, cookies",
    "Sources/DeskService/Actions/DeskForms.swift": "the desk's four forms, one shape each",
    "Sources/DeskService/OIDC/ProviderDocuments.swift": "the provider's three documents as Codable values",
    "Sources/LedgerDomain/SupportStore.swift": "support's store and the records it answers",
    "Sources/LedgerDomain/ErasureStore.swift": "an erasure's store and the targets, counts and record it speaks in",
    "Sources/Flows/AppleApps.swift": "an app, the apps, and the two abilities a flow asks of one",
    "Sources/Messaging/Messages.swift": "a Kafka message as the flows see it, in and out",
    "Sources/Messaging/Disposition.swift": "a handler's answer and the records, letters and let-go it carries",
    "Sources/LedgerDomain/Rules/Credit.swift": "a support credit held, untied or claimed",
    "Sources/LedgerDomain/Rules/NotificationDecision.swift": "a notification's facts asked, found, written, decided",
    "Sources/Observability/MetricSeries.swift": "Prometheus' three series kinds behind one protocol",
    # The simulator (it only faces tests): Apple's documented bodies, one Codable type each.
    "Sources/AppStoreSimulator/AppStoreSimulator+VerifyReceipt.swift": "verifyReceipt's request and answer bodies",
    "Sources/AppStoreSimulator/NotificationPayloads.swift": "App Store Server Notifications V2 bodies",
}

DECLARATION = re.compile(
    r"^(?:(?:public|package|internal|private|fileprivate|final|indirect|@\w+(?:\([^)]*\))?)\s+)*"
    r"(?:struct|class|enum|protocol|actor)\s+\w+", re.M)


def main() -> int:
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    os.chdir(root)
    past = {}
    for directory, _, names in os.walk("Sources"):
        for name in names:
            if name.endswith(".swift"):
                path = os.path.join(directory, name)
                text = open(path, encoding="utf-8").read()
                lines, types = text.count("\n"), len(DECLARATION.findall(text))
                if lines > MAX_LINES or types > MAX_TYPES:
                    past[path] = (lines, types)
    failures = [f"{path}: {lines} lines, {types} top-level types: split it, or say why it reads better whole "
                f"(Tests/structure/check_file_sizes.py)" for path, (lines, types) in sorted(past.items())
                if path not in REASONS]
    failures += [f"{path}: listed, but it is gone or within {MAX_LINES} lines and {MAX_TYPES} types: remove it "
                 f"from the list" for path in sorted(REASONS) if path not in past]
    for failure in failures:
        print("FAIL ", failure)
    if failures:
        return 1
    print(f"ok    every file over {MAX_LINES} lines or {MAX_TYPES} top-level types says why ({len(past)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
