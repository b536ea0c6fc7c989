package import AppleVerification
import Crypto
package import Events
package import Foundation
package import LedgerDomain
package import Messaging
package import Observability
package import Vocabulary

/// The jobs topic (docs/contract.md sections 2 to 4): a job becomes a grant or a deny event, or a dead letter.
///
/// A job's life: parse it → look it up in the ledger (a job delivered again gets its first answer; a signed
/// transaction, checked without Apple, is looked up by the record step instead) → verify its proof with Apple,
/// retrying what is transient → run the contract's checks → claim the purchase and record the decision in one
/// step → publish the event. Jobs of one app share their app's slots: an app whose
/// Apple lane is paused, or whose circuit is open, holds only its own.
package struct JobHandler: MessageHandler {
    package struct Settings: Sendable {
        /// `jobs.max_bytes`.
        var maxBytes: Int
        /// `apple.transaction_id_requires_account_token`.
        var transactionIDRequiresAccountToken: Bool
        /// Apple's retries: `retry.*`.
        var retry: RetryPolicy
        /// `topics.results`.
        var resultsTopic: String
        /// `events.source`.
        var eventSource: String
        /// `topics.retries`: a job read there was parked, and `parked_from` says where it was first read.
        var retriesTopic: String? = nil
        /// `apple.verify_receipt.status_21002_calls`: verifyReceipt's answers of 21002 ("malformed, or a
        /// temporary issue") for a receipt not known to be Apple's before it is denied `invalid_receipt`.
        var malformedReceiptCalls = 5
        /// The wait after a first 21002, doubling after each next one; never shortened by the retry policy's
        /// `maxBackoff` (five calls span 15 s at least). Shorter in tests only.
        package var malformedReceiptFirstWait: Duration = .seconds(1)

        package init(
            maxBytes: Int, transactionIDRequiresAccountToken: Bool, retry: RetryPolicy, resultsTopic: String,
            eventSource: String, retriesTopic: String? = nil, malformedReceiptCalls: Int = 5
        ) {
            self.maxBytes = maxBytes
            self.transactionIDRequiresAccountToken = transactionIDRequiresAccountToken
            self.retry = retry
            self.resultsTopic = resultsTopic
            self.eventSource = eventSource
            self.retriesTopic = retriesTopic
            self.malformedReceiptCalls = malformedReceiptCalls
        }
    }

    package let settings: Settings
    package let apps: AppleApps
    package let decisions: any DecisionStore
    package let metrics: WorkerMetrics
    package let logger: Logger
    /// Finish Transaction after each grant published (`apple.finish_transactions`), nil: off.
    package var finisher: TransactionFinisher? = nil

    package init(
        settings: Settings, apps: AppleApps, decisions: any DecisionStore, metrics: WorkerMetrics, logger: Logger,
        finisher: TransactionFinisher? = nil
    ) {
        self.settings = settings
        self.apps = apps
        self.decisions = decisions
        self.metrics = metrics
        self.logger = logger
        self.finisher = finisher
    }

    package var deadLetterReason: DeadLetterReason { .malformedJob }

    package func delivered(_ records: [OutboundRecord]) { finisher?.granted(records, defaultApp: apps.defaultApp.name) }

    package func isPermanent(_ error: any Error) -> Bool { (error as? LedgerError)?.isPermanent == true }

    /// The job, parsed once as it is taken: its app's slots are its group, also for a job that is not valid but
    /// names its game (it waits, and is parked, with that game's jobs: one game's bad jobs never take another's
    /// room); a job that names no app here, or cannot be read, is answered without Apple in the default app's slots.
    /// A player waits from the job's send (the producer's create time on the record); the parse goes on to
    /// ``handle(_:context:)``.
    package func intake(of message: InboundMessage) -> Intake {
        let parsed = JobParser.parse(
            message.value, maxBytes: settings.maxBytes,
            transactionIDRequiresAccountToken: settings.transactionIDRequiresAccountToken)
        let app: AppleApp? =
            switch parsed {
            case .job(let job): apps.app(bundleID: job.bundleID)
            case .invalidJob(let identity, _): apps.app(bundleID: identity.bundleID)
            case .unreadable: nil
            }
        let group = (app ?? apps.defaultApp).name
        return Intake(
            group: group, waitStart: message.timestamp.map { WaitStart(flow: "job", app: group, at: $0) },
            reading: parsed)
    }

    package func handle(_ message: InboundMessage, context: any HandlingContext) async throws -> Disposition {
        let job: ReceiptJob
        // Read once, as it was taken (``intake(of:)``); a context that carries no reading is a caller's bug, and its
        // message goes to the dead-letter topic rather than being read a second time.
        switch context.intake.reading as? JobParseResult ?? .unreadable(reason: "the job was not read as it was taken")
        {
        case .unreadable(let reason):
            // No order to answer: the dead letter alone.
            return .deadLetter(DeadLetter(reason: .malformedJob, error: reason))
        case .invalidJob(let identity, let reason):
            return try await denyMalformed(identity, reason: reason, message: message, context: context)
        case .job(let parsed):
            job = parsed
        }
        logger.debug("job received", ["job_id": job.jobID, "partition": message.topicPartition.description])
        let app = apps.app(bundleID: job.bundleID)
        // A bundle id no app has keeps its rows apart from every configured app's.
        let key = DecisionKey(
            app: app?.scope ?? AppScope(job.bundleID ?? ""), jobID: job.jobID, fingerprint: job.fingerprint)
        // A signed transaction is checked here, without Apple (but one that names no environment, looked up):
        // looking every such job up first would cost a ledger round trip per job to spare the few delivered
        // again one signature check. Recording answers
        // those with their first answer anyway (the ledger looks a job up before it claims anything), and a
        // dead letter is only sent once the lookup says the job was never answered.
        let checkedHere = if case .signedTransaction = job.proof { true } else { false }
        if !checkedHere, let stored = try await storedAnswer(key, context: context) {
            // A job delivered again: its first answer, unchanged.
            return .publish(publishing(stored))
        }
        guard let app else {
            // Never sent to Apple with another app's credentials: no app here sells this purchase.
            let verdict = AppleVerdict.rejected(
                .bundleMismatch, detail: "no configured app has the job's bundle_id \(job.bundleID ?? "")")
            return try await record(
                job, key, OrderChecks.evaluate(job, verdict: verdict), attempts: 0, context: context)
        }
        switch try await verify(job, with: app, context: context) {
        case .deadLetter(let letter):
            if checkedHere, let stored = try await storedAnswer(key, context: context) {
                return .publish(publishing(stored))
            }
            return .deadLetter(letter)
        case .verdict(let verdict, let attempts):
            let outcome = OrderChecks.evaluate(job, verdict: verdict)
            logger.debug(
                "job checked",
                outcome.logFields.merging([
                    "job_id": job.jobID, "app": app.name, "attempts": String(attempts),
                    "trace_id": TraceContext(headers: context.message.headers)?.traceID ?? "",
                ]) { $1 })
            return try await record(job, key, outcome, attempts: attempts, context: context)
        }
    }

    /// The answer the ledger keeps for a job delivered again (counted as replayed), or nil.
    private func storedAnswer(_ key: DecisionKey, context: any HandlingContext) async throws -> StoredEvent? {
        let stored = try await context.retrying(
            "ledger_lookup", stage: metrics.ledgerLookup, { try await decisions.storedDecision(key) })
        if stored != nil { metrics.replayedResults.increment() }
        return stored
    }

    /// Apple's verdict, or the dead letter of a job Apple cannot verify.
    package enum AppleAnswer {
        case verdict(AppleVerdict, attempts: Int)
        case deadLetter(DeadLetter)
    }

    /// Asks Apple until it gives a verdict. A transient failure is retried with backoff (never sooner than
    /// Apple's `Retry-After`) until `retry.max_attempts` calls, then dead-lettered `retries_exhausted`; a
    /// request Apple refuses (a key, an account) is dead-lettered `cannot_verify`: neither is a deny. While
    /// the app's circuit is open or its lane paused, the job waits in its app's slots, spending no attempt.
    private func verify(_ job: ReceiptJob, with app: AppleApp, context: any HandlingContext) async throws -> AppleAnswer
    {
        var attempts = 0
        var malformedAnswers = 0
        let selection = ReceiptSelection(transactionID: job.transactionID, productID: job.productID)
        // A call cut short by the stop (a cancelled request) says nothing about the purchase.
        let rounds = AppleRetry(
            policy: settings.retry, sleep: { try await context.sleep(for: $0) },
            letGo: { context.mustLetGo || Task.isCancelled })
        let ended = try await rounds.run(attempts: &attempts) { attempts in
            try context.checkLetGo()
            var made = attempts
            let verdict = try await context.traced(
                "apple verify",
                attributes: [
                    ("receipt_worker.app", .string(app.name)), ("receipt_worker.proof", .string(job.proof.kind)),
                ]
            ) { try await app.purchases.verify(job.proof, selecting: selection, attempts: &made) }
            attempts = made
            return verdict
        } failed: { error, attempts -> AppleRetry.Next<AppleAnswer> in
            let appleError = error as? AppleVerificationError
            let reason = appleError?.reason ?? "\(error)"
            guard appleError?.isRetriable ?? true else {
                return .stop(.deadLetter(DeadLetter(reason: .cannotVerify, error: reason, attempts: attempts)))
            }
            var next = AppleRetry.Next<AppleAnswer>.retry(after: appleError?.retryDelay)
            if appleError?.code == .possiblyMalformed {
                // Apple's 21002 means a malformed receipt, or its own temporary issue: asked again, at least
                // 1 s later and doubling, so a deny comes only once Apple said it for seconds on end (whatever
                // retry.max_backoff_ms: a short backoff must not make a deny of Apple's bad minute).
                malformedAnswers += 1
                guard malformedAnswers < settings.malformedReceiptCalls else {
                    let detail = "\(reason), on \(malformedAnswers) calls"
                    return .stop(.verdict(.rejected(.invalidReceipt, detail: detail), attempts: attempts))
                }
                next = .retryNoSoonerThan(settings.malformedReceiptFirstWait * (1 << min(malformedAnswers - 1, 10)))
            }
            guard settings.retry.mayRetry(afterAttempts: attempts) else {
                return .stop(.deadLetter(DeadLetter(reason: .retriesExhausted, error: reason, attempts: attempts)))
            }
            metrics.appleRetries.increment()
            logger.debug(
                "Apple transient failure; retrying",
                ["job_id": job.jobID, "app": app.name, "attempts": String(attempts), "error": reason])
            return next
        }
        switch ended {
        case .answered(let verdict): return .verdict(verdict, attempts: attempts)
        case .stopped(let answer): return answer
        }
    }

    /// Records the checks' outcome with its claim, then publishes the event the ledger kept. A grant the
    /// ledger refuses (the purchase another order's, the order granted with another purchase, the purchase
    /// refunded) is recorded as that deny instead.
    ///
    /// The events and the decision are built by synchronous helpers: what an async function builds itself takes
    /// room in its frame, which the task allocates whole at every call (built here, they made this frame 15.6 KB
    /// at every job). Not inlined, so its frame is not added to ``handle(_:context:)``'s while Apple
    /// is asked.
    @inline(never)
    private func record(
        _ job: ReceiptJob, _ key: DecisionKey, _ outcome: OrderChecks.Verdict, attempts: Int,
        context: any HandlingContext
    ) async throws -> Disposition {
        let now = Date()
        switch outcome {
        case .deny(let reason, let detail, let transaction, let environment):
            let denied = resultEvent(
                .deny(reason), job, key, transaction, environment, detail, attempts: attempts, at: now)
            return try await deny(denied, key, context: context)
        case .grant(let transaction, let environment):
            let grant = resultEvent(.grant, job, key, transaction, environment, nil, attempts: attempts, at: now)
            let decision = Self.grantDecision(grant, of: job, key, transaction, environment)
            let verdict = try await context.retrying(
                "ledger_record", stage: metrics.ledgerRecord, { try await decisions.record(decision) })
            switch grantAnswer(to: verdict, grant: grant, stored: decision.event, of: job, key) {
            case .publish(let records):
                return .publish(records)
            case .credited(let tied):
                return try await answer(tied, key, context: context)
            case .refused(let reason, let detail):
                let denied = resultEvent(
                    .deny(reason), job, key, transaction, environment, detail, attempts: attempts, at: now)
                return try await deny(denied, key, context: context)
            }
        }
    }

    /// The job's event for a decision.
    @inline(never)
    private func resultEvent(
        _ decision: ResultEvent.Decision, _ job: ReceiptJob, _ key: DecisionKey, _ transaction: AppleTransaction?,
        _ environment: AppleEnvironment?, _ detail: String?, attempts: Int, at now: Date
    ) -> ResultEvent {
        var event = ResultEvent(
            eventID: ResultEvent.eventID(
                decision: decision, app: key.app, jobID: job.jobID, fingerprint: key.fingerprint,
                orderID: job.orderID, transactionID: transaction?.transactionID),
            jobID: job.jobID, orderID: job.orderID, userID: job.userID, decision: decision,
            productID: job.productID, quantity: job.quantity, transactionID: transaction?.transactionID,
            originalTransactionID: transaction?.originalTransactionID, environment: environment,
            purchaseDate: transaction?.purchaseDate, expiresDate: transaction?.expiresDate, verifiedAt: now,
            attempts: attempts, detail: detail, bundleID: job.bundleID ?? apps.defaultApp.bundleID,
            value: transaction?.value ?? PurchaseValue())
        if decision == .grant { event.revenue = Revenue.ofSale(event.value, environment: environment) }
        return event
    }

    /// A grant's claim on its purchase, recorded with its event in one step.
    @inline(never)
    private static func grantDecision(
        _ grant: ResultEvent, of job: ReceiptJob, _ key: DecisionKey, _ transaction: AppleTransaction,
        _ environment: AppleEnvironment
    ) -> Decision {
        let claim = GrantClaim(
            orderID: job.orderID, transactionID: transaction.transactionID,
            purchaseID: transaction.purchaseIdentity, environment: environment,
            userID: job.userID, productID: job.productID, quantity: job.quantity,
            originalTransactionID: transaction.originalTransactionID, revenue: grant.revenue,
            subscriptionPeriod: subscriptionPeriod(transaction))
        return Decision(
            key: key, grant: claim, event: grant.stored(),
            refundFollowUp: { RefundFollowUp.make(grant: grant, taken: $0) },
            appleRefund: RefundFollowUp.stated(by: transaction),
            creditAnswer: { tiedAnswer(grant, creditEventID: $0, revenue: $1) })
    }

    /// What follows a grant's claim: the records to publish, a credit's answer to record, or the deny it became.
    private enum GrantAnswer {
        case publish([OutboundRecord])
        case credited(StoredEvent)
        case refused(DenyReason, detail: String)
    }

    /// The ledger's verdict on a grant's claim, counted and logged.
    @inline(never)
    private func grantAnswer(
        to verdict: ClaimVerdict, grant: ResultEvent, stored: StoredEvent, of job: ReceiptJob, _ key: DecisionKey
    ) -> GrantAnswer {
        switch verdict {
        case .recorded:
            metrics.counter(.grant, app: appName(key)).increment()
            countSale(grant, key)
            return .publish(publishing(stored))
        case .recordedPartlyRefunded(let followUp):
            // Refunded in part before this grant: granted for what the player kept, the share taken back.
            metrics.counter(.grant, app: appName(key)).increment()
            countSale(grant, key)
            metrics.money.count(followUp.json, app: appName(key))
            logger.info(
                "granted a purchase refunded in part before, its refund taken back",
                ["job_id": job.jobID, "event_id": followUp.eventID])
            return .publish(publishing(stored) + publishing(followUp))
        case .replay(let first):
            metrics.replayedResults.increment()
            return .publish(publishing(first))
        case .takenBack(let followUp):
            // The order's grant again (its event id unchanged: credited once, its sale counted once), then the share
            // Apple's proof says was refunded, which the ledger had not heard of, taken back.
            metrics.money.count(followUp.json, app: appName(key))
            logger.info(
                "took back a refund Apple's proof states of a purchase the order holds",
                ["job_id": job.jobID, "event_id": followUp.eventID])
            return .publish(publishing(stored) + publishing(followUp))
        case .tied(let answer):
            // The order holds the purchase by a credit (a renewal, a purchase credited unclaimed, tied now or
            // before): answered with the credit's event id, credited once.
            metrics.counter(.grant, app: appName(key)).increment()
            logger.info("answered with the order's credit", ["job_id": job.jobID, "event_id": answer.eventID])
            return .publish(publishing(answer))
        case .credited(let creditEventID, let revenue):
            // Not made here (the decision says how to answer a credit): kept for other callers of the ledger.
            return .credited(Self.tiedAnswer(grant, creditEventID: creditEventID, revenue: revenue))
        case .duplicateTransaction:
            return .refused(.duplicateTransaction, detail: "the transaction was granted to another order")
        case .orderAlreadyFulfilled:
            return .refused(.orderAlreadyFulfilled, detail: "the order was granted with another transaction")
        case .revoked:
            return .refused(
                .revoked,
                detail: "the purchase was refunded or revoked after it was granted or credited (App Store notification)"
            )
        }
    }

    /// An auto-renewable subscription's period, which the ledger watches from the grant (a renewal or an
    /// expiry never heard is asked of Apple); nil for anything else, or a period that ends before it starts.
    package static func subscriptionPeriod(_ transaction: AppleTransaction) -> DateInterval? {
        guard transaction.productType == .autoRenewableSubscription, transaction.originalTransactionID != nil,
            let start = transaction.purchaseDate, let end = transaction.expiresDate, start <= end
        else { return nil }
        return DateInterval(start: start, end: end)
    }

    /// A grant recorded: what it adds to revenue (a tie to a credit adds nothing: the credit was counted).
    private func countSale(_ grant: ResultEvent, _ key: DecisionKey) {
        metrics.money.sale(
            app: appName(key), currency: grant.value.currency, revenue: grant.revenue, environment: grant.environment)
    }

    /// The answer to a job whose purchase its order holds by a credit of the worker's (a purchase credited
    /// unclaimed, a subscription's period): its grant, with the credit's event id (grant services credit once per
    /// event id), what the credit counted as revenue (two events of one id say the same) and a detail that says so.
    package static func tiedAnswer(_ grant: ResultEvent, creditEventID: String, revenue: Int64?) -> StoredEvent {
        var answer = grant
        answer.eventID = creditEventID
        answer.revenue = revenue
        answer.detail =
            "credited before this job (receipt.unclaimed or receipt.renewed with this event_id): one credit"
        return answer.stored()
    }

    /// Records a grant that claims nothing (its order already holds the purchase by a credit), then publishes
    /// it, or the first answer of a job decided meanwhile.
    private func answer(_ stored: StoredEvent, _ key: DecisionKey, context: any HandlingContext) async throws
        -> Disposition
    {
        try await recordUnclaimed(stored, key, counted: metrics.counter(.grant, app: appName(key)), context: context)
    }

    /// Records a deny (it claims nothing), then publishes the event the ledger kept: this one, or the first
    /// answer of a job decided meanwhile.
    private func deny(_ event: ResultEvent, _ key: DecisionKey, context: any HandlingContext) async throws
        -> Disposition
    {
        try await recordUnclaimed(
            event.stored(), key, counted: metrics.counter(event.decision, app: appName(key)), context: context)
    }

    /// The app a decision is counted under: its name, `other` for a bundle id no app has (kept few: the label
    /// never takes a client's text).
    private func appName(_ key: DecisionKey) -> String {
        apps.all.first { $0.scope == key.app }?.name ?? "other"
    }

    /// Records an answer that claims no purchase; publishes it (counted), or the job's first answer.
    private func recordUnclaimed(
        _ stored: StoredEvent, _ key: DecisionKey, counted: Counter, context: any HandlingContext
    ) async throws -> Disposition {
        let outcome = try await context.retrying(
            "ledger_record", stage: metrics.ledgerRecord,
            { try await decisions.record(Decision(key: key, grant: nil, event: stored)) })
        if case .replay(let first) = outcome {
            metrics.replayedResults.increment()
            return .publish(publishing(first))
        }
        counted.increment()
        return .publish(publishing(stored))
    }

    /// Where a message was first read, `topic-partition@offset`: its own place, or, for a job parked on the
    /// retries topic, the place the worker wrote in `parked_from` (a client's header of that name on the jobs
    /// topic is not believed), so both deliveries of one malformed job get one event id.
    package static func firstRead(_ message: InboundMessage, retriesTopic: String?) -> String {
        if message.topic == retriesTopic, let origin = message.header(ParkedOrigin.header)?.stringValue {
            return origin
        }
        return "\(message.topicPartition)@\(message.offset)"
    }

    /// A JSON object with an `order_id` but a field missing or invalid: a deny `malformed_job` for the order
    /// (kept in the ledger by its job id when it has a usable one) and the dead letter.
    private func denyMalformed(
        _ identity: JobIdentity, reason: String, message: InboundMessage, context: any HandlingContext
    ) async throws -> Disposition {
        let fingerprint = SHA256Digest.hex(message.value)
        let key = DecisionKey(app: .defaultApp, jobID: identity.jobID, fingerprint: fingerprint)
        // Without a job id, the event's id is where the job was first read (a replay's original place).
        let place = ReplayedPlace.original(
            of: message, own: Self.firstRead(message, retriesTopic: settings.retriesTopic))
        let event = ResultEvent(
            eventID: identity.jobID.isEmpty
                ? StableID.uuid("job\u{0}\(place)")
                : ResultEvent.eventID(
                    decision: .deny(.malformedJob), app: .defaultApp, jobID: identity.jobID, fingerprint: fingerprint,
                    orderID: identity.orderID, transactionID: nil),
            jobID: identity.jobID, orderID: identity.orderID, userID: identity.userID, decision: .deny(.malformedJob),
            productID: identity.productID, quantity: identity.quantity, transactionID: nil,
            originalTransactionID: nil, environment: nil, purchaseDate: nil, expiresDate: nil, verifiedAt: Date(),
            attempts: 0, detail: reason)
        let letter = DeadLetter(reason: .malformedJob, error: reason)
        guard !identity.jobID.isEmpty else {
            // No usable job id (absent, too long, or unfit for a ledger key): nothing to remember it by.
            metrics.counter(.deny(.malformedJob), app: appName(key)).increment()
            return .deadLetter(letter, after: publishing(event.stored()))
        }
        guard case .publish(let records) = try await deny(event, key, context: context) else { return .letGo }
        return .deadLetter(letter, after: records)
    }

    /// The records that publish an answer: its event, then its follow-ups.
    private func publishing(_ event: StoredEvent) -> [OutboundRecord] {
        event.published.map { $0.record(topic: settings.resultsTopic, source: settings.eventSource) }
    }
}
