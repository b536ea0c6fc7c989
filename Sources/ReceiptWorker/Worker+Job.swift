import AppleVerification
import Foundation
import Kafka
import Ledger
import Observability

extension Worker {
    /// Takes one message from receipt to published answer. Never throws: whatever happens ends as a
    /// result event, a dead letter, or (at shutdown) an unfinished job that will be delivered again.
    func handle(_ message: KafkaMessage) async {
        switch JobParser.parse(message.value, maxBytes: configuration.jobsMaxBytes) {
        case .unreadable(let reason):
            await deadLetter(message, reason: "malformed_job", error: reason, attempts: 0)
        case .invalidJob(let identity, let reason):
            let event = ResultEvent(
                eventID: ResultEvent.eventID(
                    decision: .deny,
                    jobID: identity.jobID.isEmpty ? "\(message.topicPartition)@\(message.offset)" : identity.jobID,
                    orderID: identity.orderID, transactionID: nil),
                jobID: identity.jobID, orderID: identity.orderID, userID: identity.userID, decision: .deny,
                reason: "malformed_job", productID: identity.productID, quantity: identity.quantity, transactionID: nil,
                originalTransactionID: nil, environment: nil, purchaseDate: nil, expiresDate: nil, verifiedAt: Date(),
                attempts: 0, detail: reason)
            let published: (json: Data, headers: [KafkaHeader]?)?
            if identity.jobID.isEmpty {
                metrics.decision("deny", reason: "malformed_job").increment()
                published = (event.json(), event.headers(source: configuration.eventSource))
            } else {
                published = await record(jobID: identity.jobID, claim: .deny, event: event)
            }
            guard let published else { return }
            await publishResult(published.json, key: identity.orderID, headers: published.headers)
            await deadLetter(message, reason: "malformed_job", error: reason, attempts: 0)
        case .job(let job):
            await process(job, message: message)
        }
    }

    private func process(_ job: ReceiptJob, message: KafkaMessage) async {
        logger.debug(
            "job received",
            ["job_id": job.jobID, "partition": message.topicPartition.description, "offset": String(message.offset)])
        // Two levels: nil when the worker stopped before the ledger answered, .some(nil) when the job is new.
        guard
            let lookup = await retrying(
                "ledger lookup", stage: metrics.ledgerLookup, { try await self.ledger.storedEvent(jobID: job.jobID) })
        else { return }
        if let stored = lookup {
            metrics.replayedResults.increment()
            await publishResult(stored, key: job.orderID)  // a re-delivered job: its first answer, unchanged
            return
        }
        var attempts = 0
        let verdict: AppleVerdict
        while true {
            await breaker.waitUntilCallsAllowed()
            if isStopping { return }
            let before = attempts
            do {
                verdict = try await apple.verify(job.proof, attempts: &attempts)
                breaker.record(success: true)
                break
            } catch {
                attempts = max(attempts, before + 1)
                let appleError = error as? AppleVerificationError
                guard appleError?.isRetriable ?? true else {
                    await deadLetter(
                        message, reason: "cannot_verify", error: appleError?.reason ?? "\(error)", attempts: attempts)
                    return
                }
                breaker.record(success: false)
                guard configuration.retry.mayRetry(afterAttempts: attempts) else {
                    await deadLetter(
                        message, reason: "retries_exhausted", error: appleError?.reason ?? "\(error)",
                        attempts: attempts)
                    return
                }
                metrics.appleRetries.increment()
                let delay = configuration.retry.delay(afterAttempts: attempts, retryAfter: appleError?.retryAfter)
                logger.debug(
                    "Apple transient failure; retrying",
                    ["job_id": job.jobID, "attempts": String(attempts), "error": "\(error)"])
                try? await Task.sleep(for: delay)
                if isStopping { return }
            }
        }
        let outcome = OrderChecks.evaluate(job, verdict: verdict)
        logger.debug("job checked", ["job_id": job.jobID, "outcome": "\(outcome)", "attempts": String(attempts)])
        await decide(job, outcome: outcome, attempts: attempts)
    }

    private func decide(_ job: ReceiptJob, outcome: OrderChecks.Outcome, attempts: Int) async {
        let now = Date()
        func event(
            _ decision: ResultEvent.Decision, _ reason: String, _ transaction: AppleTransaction?,
            _ environment: String?,
            _ detail: String?
        ) -> ResultEvent {
            ResultEvent(
                eventID: ResultEvent.eventID(
                    decision: decision, jobID: job.jobID, orderID: job.orderID,
                    transactionID: transaction?.transactionID),
                jobID: job.jobID, orderID: job.orderID, userID: job.userID, decision: decision, reason: reason,
                productID: job.productID, quantity: job.quantity, transactionID: transaction?.transactionID,
                originalTransactionID: transaction?.originalTransactionID, environment: environment,
                purchaseDate: transaction?.purchaseDate, expiresDate: transaction?.expiresDate, verifiedAt: now,
                attempts: attempts, detail: detail)
        }
        let published: (json: Data, headers: [KafkaHeader]?)?
        switch outcome {
        case .deny(let reason, let detail, let transaction, let environment):
            published = await record(
                jobID: job.jobID, claim: .deny, event: event(.deny, reason, transaction, environment, detail))
        case .grant(let transaction, let environment):
            let grant = event(.grant, "verified", transaction, environment, nil)
            let bytes = grant.json()
            let claim = LedgerClaim.grant(orderID: job.orderID, transactionID: transaction.transactionID)
            switch await retrying(
                "ledger", stage: metrics.ledgerRecord,
                { try await self.ledger.record(jobID: job.jobID, claim: claim, event: bytes) })
            {
            case .recorded?:
                metrics.decision("grant", reason: "verified").increment()
                published = (bytes, grant.headers(source: configuration.eventSource))
            case .replay(let data)?:
                metrics.replayedResults.increment()
                published = (data, nil)
            case .duplicateTransaction?:
                published = await record(
                    jobID: job.jobID, claim: .deny,
                    event: event(
                        .deny, "duplicate_transaction", transaction, environment,
                        "the transaction was granted to another order"))
            case .orderAlreadyFulfilled?:
                published = await record(
                    jobID: job.jobID, claim: .deny,
                    event: event(
                        .deny, "order_already_fulfilled", transaction, environment,
                        "the order was granted with another transaction"))
            case nil: published = nil
            }
        }
        if let published { await publishResult(published.json, key: job.orderID, headers: published.headers) }
    }

    /// Stores a decision; returns the event to publish: this one with its headers, or the stored one (its
    /// headers to be read back) when the job was decided before. Nil when the worker stopped first.
    func record(jobID: String, claim: LedgerClaim, event: ResultEvent) async -> (json: Data, headers: [KafkaHeader]?)? {
        let bytes = event.json()
        switch await retrying(
            "ledger", stage: metrics.ledgerRecord,
            { try await self.ledger.record(jobID: jobID, claim: claim, event: bytes) })
        {
        case .replay(let data)?:
            metrics.replayedResults.increment()
            return (data, nil)
        case nil: return nil
        default:
            metrics.decision(event.decision.rawValue, reason: event.reason).increment()
            return (bytes, event.headers(source: configuration.eventSource))
        }
    }

    /// Repeats `body` with backoff until it succeeds or the worker stops (then nil): for the ledger and
    /// the broker, whose failures are never the player's.
    func retrying<T: Sendable>(_ what: String, stage: Histogram? = nil, _ body: @Sendable () async throws -> T) async
        -> T?
    {
        let started = ContinuousClock.now
        defer { stage?.observe(ContinuousClock.now - started) }
        var attempt = 0
        while !isStopping || attempt == 0 {
            attempt += 1
            do {
                return try await body()
            } catch {
                logger.warning("\(what) failed; retrying", ["error": "\(error)", "attempt": String(attempt)])
                try? await Task.sleep(for: configuration.retry.delay(afterAttempts: min(attempt, 8), retryAfter: nil))
            }
        }
        return nil
    }
}
