import AppleVerification
import Foundation
import Kafka
import Ledger
import Observability

/// One job being handled: its message and the assignment of its partition it started under.
struct JobTicket: Sendable {
    let message: KafkaMessage
    let generation: UInt64
}

/// How handling a job ended. Only an answered job may be committed past.
enum JobEnd: Sendable, Equatable {
    /// Its answer (a result event, a dead letter, or both) was acknowledged by the broker.
    case answered
    /// Left unanswered because the worker is stopping or the partition has a new owner: never committed
    /// past, so the job is delivered again, and the ledger gives it the same answer then.
    case redeliver
}

/// A failure that will not heal by retrying (a value the database refuses, a message the broker will never
/// take): the job ends in the DLQ instead of holding its partition forever.
struct PermanentFailure: Error, Sendable {
    let reason: String
}

extension Worker {
    /// Takes one message from receipt to published answer. Never throws: whatever happens ends as a
    /// result event, a dead letter, or a job left for its next delivery (``JobEnd/redeliver``).
    func handle(_ ticket: JobTicket) async -> JobEnd {
        let message = ticket.message
        // One consumer, one set of guarantees (commits behind finished work, drain, liveness) for all three.
        if message.topic == configuration.topics.notifications { return await handleNotification(ticket) }
        if message.topic == configuration.topics.consumption { return await handleConsumptionAnswer(ticket) }
        switch JobParser.parse(
            message.value, maxBytes: configuration.jobsMaxBytes,
            transactionIDRequiresAccountToken: configuration.apple.transactionIDRequiresAccountToken)
        {
        case .unreadable(let reason):
            return await deadLetter(ticket, reason: "malformed_job", error: reason, attempts: 0)
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
            let published: (json: Data, headers: [KafkaHeader]?)
            if identity.jobID.isEmpty {
                // No usable job id (absent, too long, or unfit for a ledger key): nothing to remember it by.
                metrics.decision("deny", reason: "malformed_job").increment()
                published = (event.json(), event.headers(source: configuration.eventSource))
            } else {
                switch await record(ticket, jobID: identity.jobID, claim: .deny, event: event) {
                case .success(let recorded?): published = recorded
                case .success(nil): return .redeliver
                case .failure(let failure):
                    return await deadLetter(ticket, reason: "malformed_job", error: failure.reason, attempts: 0)
                }
            }
            guard await publishResult(ticket, published.json, key: identity.orderID, headers: published.headers)
            else { return .redeliver }
            return await deadLetter(ticket, reason: "malformed_job", error: reason, attempts: 0)
        case .job(let job):
            return await process(job, ticket: ticket)
        }
    }

    private func process(_ job: ReceiptJob, ticket: JobTicket) async -> JobEnd {
        let message = ticket.message
        logger.debug(
            "job received",
            ["job_id": job.jobID, "partition": message.topicPartition.description, "offset": String(message.offset)])
        let lookup: Data?
        switch await retrying(
            "ledger_lookup", ticket, stage: metrics.ledgerLookup,
            { try await self.ledger.storedEvent(jobID: job.jobID) })
        {
        case .success(let stored?): lookup = stored
        case .success(nil): return .redeliver
        case .failure(let failure):
            return await deadLetter(ticket, reason: "malformed_job", error: failure.reason, attempts: 0)
        }
        if let stored = lookup {
            metrics.replayedResults.increment()
            // A re-delivered job: its first answer, unchanged.
            return await publishResult(ticket, stored, key: job.orderID) ? .answered : .redeliver
        }
        var attempts = 0
        guard let app = apps.app(bundleID: job.bundleID) else {
            // Never sent to Apple with another app's credentials: no app here sells this purchase.
            let verdict = AppleVerdict.rejected(
                .bundleMismatch, detail: "no configured app has the job's bundle_id \(job.bundleID ?? "")")
            return await decide(job, ticket: ticket, outcome: OrderChecks.evaluate(job, verdict: verdict), attempts: 0)
        }
        let verdict: AppleVerdict
        while true {
            await breaker.waitUntilCallsAllowed()
            if mustLetGo(ticket) { return .redeliver }
            let before = attempts
            do {
                verdict = try await app.verifier.verify(
                    job.proof, selecting: ReceiptSelection(transactionID: job.transactionID, productID: job.productID),
                    attempts: &attempts)
                breaker.record(success: true)
                break
            } catch {
                // A call cut short by the stop (a cancelled request) says nothing about the purchase.
                if mustLetGo(ticket) || Task.isCancelled { return .redeliver }
                attempts = max(attempts, before + 1)
                let appleError = error as? AppleVerificationError
                guard appleError?.isRetriable ?? true else {
                    breaker.record(success: true)  // Apple answered: it is up (a half-open trial ends here too)
                    return await deadLetter(
                        ticket, reason: "cannot_verify", error: appleError?.reason ?? "\(error)", attempts: attempts)
                }
                // A 429 is Apple up and answering, about one app's lane, which the governor pauses: it must
                // not open the breaker that stops every app.
                breaker.record(success: appleError?.code == .rateLimited)
                guard configuration.retry.mayRetry(afterAttempts: attempts) else {
                    return await deadLetter(
                        ticket, reason: "retries_exhausted", error: appleError?.reason ?? "\(error)",
                        attempts: attempts)
                }
                metrics.appleRetries.increment()
                let delay = configuration.retry.delay(afterAttempts: attempts, retryAfter: appleError?.retryDelay)
                logger.debug(
                    "Apple transient failure; retrying",
                    ["job_id": job.jobID, "app": app.name, "attempts": String(attempts), "error": "\(error)"])
                try? await Task.sleep(for: delay)
                if mustLetGo(ticket) { return .redeliver }
            }
        }
        let outcome = OrderChecks.evaluate(job, verdict: verdict)
        logger.debug(
            "job checked",
            ["job_id": job.jobID, "app": app.name, "outcome": "\(outcome)", "attempts": String(attempts)])
        return await decide(job, ticket: ticket, outcome: outcome, attempts: attempts)
    }

    /// The purchase identity as the ledger keys it. Ledgers written before purchase identities hold each
    /// grant's transaction id as its key; a `t:` identity (a transaction or original transaction id) is
    /// stored bare so that those grants and new claims of the same purchase meet. `w:` (a billing period)
    /// keeps its prefix: web order line item ids are another number sequence.
    static func ledgerPurchaseID(_ identity: String) -> String {
        identity.hasPrefix("t:") ? String(identity.dropFirst(2)) : identity
    }

    /// True when the job must be left for its next delivery: the worker is stopping, or the job's partition
    /// was released (its new owner runs the job again).
    func mustLetGo(_ ticket: JobTicket) -> Bool {
        isStopping || !state.holds(ticket.message.topicPartition, generation: ticket.generation)
    }

    private func decide(_ job: ReceiptJob, ticket: JobTicket, outcome: OrderChecks.Outcome, attempts: Int) async
        -> JobEnd
    {
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
                attempts: attempts, detail: detail, bundleID: job.bundleID ?? apps.defaultApp.verifier.bundleID)
        }
        let recorded: Result<(json: Data, headers: [KafkaHeader]?)?, PermanentFailure>
        switch outcome {
        case .deny(let reason, let detail, let transaction, let environment):
            recorded = await record(
                ticket, jobID: job.jobID, claim: .deny, event: event(.deny, reason, transaction, environment, detail))
        case .grant(let transaction, let environment):
            let grant = event(.grant, "verified", transaction, environment, nil)
            let bytes = grant.json()
            let claim = LedgerClaim.grant(
                orderID: job.orderID, transactionID: transaction.transactionID,
                purchaseID: Self.ledgerPurchaseID(transaction.purchaseIdentity))
            switch await retrying(
                "ledger_record", ticket, stage: metrics.ledgerRecord,
                { try await self.ledger.record(jobID: job.jobID, claim: claim, event: bytes) })
            {
            case .success(.recorded?):
                metrics.decision("grant", reason: "verified").increment()
                recorded = .success((bytes, grant.headers(source: configuration.eventSource)))
            case .success(.replay(let data)?):
                metrics.replayedResults.increment()
                recorded = .success((data, nil))
            case .success(.duplicateTransaction?):
                recorded = await record(
                    ticket, jobID: job.jobID, claim: .deny,
                    event: event(
                        .deny, "duplicate_transaction", transaction, environment,
                        "the transaction was granted to another order"))
            case .success(.orderAlreadyFulfilled?):
                recorded = await record(
                    ticket, jobID: job.jobID, claim: .deny,
                    event: event(
                        .deny, "order_already_fulfilled", transaction, environment,
                        "the order was granted with another transaction"))
            case .success(.revoked?):
                recorded = await record(
                    ticket, jobID: job.jobID, claim: .deny,
                    event: event(
                        .deny, "revoked", transaction, environment,
                        "the purchase was refunded or revoked after it was granted (App Store notification)"))
            case .success(nil): recorded = .success(nil)
            case .failure(let failure): recorded = .failure(failure)
            }
        }
        switch recorded {
        case .success(let published?):
            let acknowledged = await publishResult(ticket, published.json, key: job.orderID, headers: published.headers)
            return acknowledged ? .answered : .redeliver
        case .success(nil): return .redeliver
        case .failure(let failure):
            return await deadLetter(ticket, reason: "malformed_job", error: failure.reason, attempts: attempts)
        }
    }

    /// Stores a decision; returns the event to publish: this one with its headers, or the stored one (its
    /// headers to be read back) when the job was decided before. Nil when the job must be let go first.
    func record(_ ticket: JobTicket, jobID: String, claim: LedgerClaim, event: ResultEvent) async
        -> Result<(json: Data, headers: [KafkaHeader]?)?, PermanentFailure>
    {
        let bytes = event.json()
        switch await retrying(
            "ledger_record", ticket, stage: metrics.ledgerRecord,
            { try await self.ledger.record(jobID: jobID, claim: claim, event: bytes) })
        {
        case .success(.replay(let data)?):
            metrics.replayedResults.increment()
            return .success((data, nil))
        case .success(nil): return .success(nil)
        case .success(_?):
            metrics.decision(event.decision.rawValue, reason: event.reason).increment()
            return .success((bytes, event.headers(source: configuration.eventSource)))
        case .failure(let failure): return .failure(failure)
        }
    }

    /// Repeats `body` with backoff until it succeeds (`.success(value)`), the job must be let go
    /// (`.success(nil)`: after the first attempt, a stopping worker or a released partition ends it), or it
    /// fails in a way that will never heal (`.failure`: an error that calls itself permanent). For the
    /// ledger and the broker, whose failures are never the player's. Each attempt is timed in `stage` and
    /// each failure counted under `operation`, so a loop that never ends still shows; one warning per job on
    /// the first failure and every tenth after, not one per attempt.
    func retrying<T: Sendable>(
        _ operation: String, _ ticket: JobTicket, stage: Histogram? = nil, _ body: @Sendable () async throws -> T
    ) async -> Result<T?, PermanentFailure> {
        var attempt = 0
        while attempt == 0 || !mustLetGo(ticket) {
            attempt += 1
            let started = ContinuousClock.now
            do {
                let value = try await body()
                stage?.observe(ContinuousClock.now - started)
                blockedOperations.withLock { if $0[operation] != nil { $0[operation] = nil } }
                return .success(value)
            } catch {
                stage?.observe(ContinuousClock.now - started)
                metrics.failure(operation).increment()
                // A topic missing or forbidden, or a ledger that keeps refusing: the worker is not ready,
                // and says so (once per job, at error level) until the operation succeeds again.
                if attempt >= 3 || (error as? KafkaError)?.isMissingTopic == true {
                    blockedOperations.withLock { $0[operation] = "\(error)" }
                    if attempt == 3 || (attempt == 1 && (error as? KafkaError)?.isMissingTopic == true) {
                        logger.error("\(operation) keeps failing; not ready", ["error": "\(error)"])
                    }
                }
                if let permanent = Self.permanence(of: error) {
                    logger.warning("\(operation) failed for good", ["error": permanent])
                    return .failure(PermanentFailure(reason: permanent))
                }
                if attempt == 1 || attempt % 10 == 0 {
                    logger.warning("\(operation) failed; retrying", ["error": "\(error)", "attempt": String(attempt)])
                }
                try? await Task.sleep(for: configuration.retry.delay(afterAttempts: min(attempt, 8), retryAfter: nil))
            }
        }
        return .success(nil)
    }

    /// The reason of an error that no retry will heal, or nil.
    static func permanence(of error: any Error) -> String? {
        if let ledger = error as? LedgerError, ledger.isPermanent { return ledger.description }
        if let kafka = error as? KafkaError, kafka.isPermanent { return kafka.description }
        return nil
    }
}
