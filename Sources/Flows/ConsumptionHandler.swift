import AppleVerification
import Foundation
package import LedgerDomain
package import Messaging
package import Observability
package import Vocabulary

/// The consumption topic (docs/contract.md section 9): a grant service's answer to a consumption (refund)
/// request, sent to Apple with Send Consumption Information.
///
/// An answer's life: read it → without the player's consent nothing is sent (Apple refuses it): counted,
/// done → find the grant it is about; the app it was granted for answers, with its own key → send it,
/// retrying what is transient until the request's deadline (when the worker saw the request), else within
/// `retry.max_attempts` → mark the request answered. An answer Apple refuses, or one that runs out of time or
/// attempts, goes to the dead-letter topic (`consumption_not_sent`).
package struct ConsumptionHandler: MessageHandler {
    package let apps: AppleApps
    package let requests: any ConsumptionRequestStore
    package let retry: RetryPolicy
    package let metrics: WorkerMetrics
    package let logger: Logger
    /// `topics.retries`: an answer read there was parked, and `parked_from` says where it was first read.
    package var retriesTopic: String? = nil
    /// The answers of each transaction, newest last (shared by every answer this handler takes).
    package let succession = AnswerSuccession()

    package init(
        apps: AppleApps, requests: any ConsumptionRequestStore, retry: RetryPolicy, metrics: WorkerMetrics,
        logger: Logger, retriesTopic: String? = nil
    ) {
        self.apps = apps
        self.requests = requests
        self.retry = retry
        self.metrics = metrics
        self.logger = logger
        self.retriesTopic = retriesTopic
    }

    package var deadLetterReason: DeadLetterReason { .consumptionNotSent }

    package func isPermanent(_ error: any Error) -> Bool { (error as? LedgerError)?.isPermanent == true }

    /// The app the answer names (`bundle_id`), else the default app: each app's answers wait in slots of their
    /// own, so one app's answers retrying against Apple never hold another's.
    /// The answer, parsed once as it is taken: its group is its app's consumption group.
    package func intake(of message: InboundMessage) -> Intake {
        let parsed = ConsumptionAnswer.parse(message.value)
        let app = (try? parsed.get()).map { apps.app(bundleID: $0.bundleID) } ?? apps.defaultApp
        return Intake(group: FlowGroup.consumption(of: app ?? apps.defaultApp), reading: parsed)
    }

    package func handle(_ message: InboundMessage, context: any HandlingContext) async throws -> Disposition {
        let answer: ConsumptionAnswer
        // Read once, as it was taken (``intake(of:)``).
        let read = context.intake.reading as? Result<ConsumptionAnswer, ConsumptionAnswer.Malformed>
        switch read ?? .failure(ConsumptionAnswer.Malformed(reason: "the answer was not read as it was taken")) {
        case .success(let parsed): answer = parsed
        case .failure(let malformed):
            return notSent("malformed consumption answer: \(malformed.reason)")
        }
        // With the policy's value only, as a dead letter keeps it: a replay reads it as the same.
        let byPolicy = message.headers.contains {
            $0.name == ConsumptionPolicyAnswers.header && $0.stringValue == RecordHeader.byPolicy
        }
        let grant = try await context.retrying("ledger_lookup", stage: metrics.ledgerLookup) {
            try await requests.grant(transactionID: answer.transactionID, app: nil)
        }
        // The answer goes with the credentials of the app the purchase was granted for; an answer naming
        // another is a grant service's mistake that would send the transaction with the wrong app's key. Only
        // when there is no grant does the answer's bundle_id choose, else the default app.
        let grantedApp = grant.flatMap { grant in apps.all.first { $0.scope == grant.app } }
        let namesGrantedApp =
            answer.bundleID.map { named in
                grantedApp.map { named.utf8.elementsEqual($0.bundleID.utf8) } ?? true
            } ?? true
        var environment: AppleEnvironment = grant?.environment == .sandbox ? .sandbox : .production
        // An answer for another app than the grant's, for none here, or for a purchase granted for an app no longer
        // configured (never sent with another app's key), cannot be sent: answered before it begins, so it
        // supersedes no answer that can be (a policy's, an older grant service's).
        let sendingApp = grant != nil && grantedApp == nil ? nil : grantedApp ?? apps.app(bundleID: answer.bundleID)
        guard namesGrantedApp, let app = sendingApp else {
            guard answer.customerConsented else {
                // The game's word that nothing is to be sent, for the purchase's request whatever app it named.
                if let grant {
                    try await markAnswered(answer, scope: grant.app, environment: environment, context: context)
                }
                return withoutConsent(answer)
            }
            if let grant, grantedApp == nil {
                return notSent("the purchase was granted for app \(grant.app.rawValue), which is not configured")
            }
            if let named = answer.bundleID, let grantedApp {
                return notSent(
                    "bundle_id \(named) is not the app the purchase was granted for (\(grantedApp.bundleID))")
            }
            return notSent("no configured app has bundle_id \(answer.bundleID ?? "")")
        }
        // What a consented answer cannot be sent without, checked before it begins: one that cannot be sent
        // supersedes no answer that can.
        var sending: (api: any ConsumptionSending, delivery: String)?
        if answer.customerConsented {
            guard let api = app.consumption else {
                return notSent("no App Store Server API key is configured for app \(app.name) (apple.api.*)")
            }
            guard let delivery = answer.deliveryStatus ?? Self.deliveryStatus(of: grant) else {
                return notSent(
                    "delivery_status is required: \(Self.whyNoDefaultDelivery(grant)); the grant service knows what"
                        + " the player received")
            }
            // A share consumed of a purchase never granted here (UNDELIVERED_OTHER by default): Apple takes only 0.
            if ConsumptionAnswer.refusesShare(answer.consumptionPercentage, delivery: delivery) {
                return notSent(
                    "consumption_percentage must be 0 with delivery status \(delivery) (the purchase was not granted"
                        + " here): Apple refuses any other; send delivery_status if it was delivered")
            }
            sending = (api, delivery)
        }
        // Begun before a grant service's answer records that it came: a policy's answer in hand is superseded on
        // every path of this one (sent, or not sent without consent), and one begun later reads the record.
        let place = AnswerSuccession.Place(firstRead(message))
        guard let ticket = succession.begin(transactionID: answer.transactionID, place: place, byPolicy: byPolicy)
        else {
            guard !byPolicy else {
                metrics.consumptionAnswer("policy_superseded").increment()
                return .publish([])
            }
            return superseded(answer, attempts: 0)
        }
        defer { succession.end(ticket) }
        if !byPolicy {
            // A grant service answered: from now on an app's policy never answers this request, whatever becomes
            // of this answer at Apple (sent, retrying, refused, or not sent without consent).
            try await context.retrying("ledger_record", stage: metrics.ledgerRecord) { [environment] in
                try await requests.consumptionAnswerReceived(
                    app: app.scope, environment: environment, transactionID: answer.transactionID)
            }
        }
        guard let (api, delivery) = sending else {
            // The game's word that nothing is to be sent: the request is answered, and no alarm waits for it.
            try await markAnswered(answer, scope: app.scope, environment: environment, context: context)
            return withoutConsent(answer)
        }
        let body = answer.appleBody(deliveryStatus: delivery)
        let respondBy = grant?.consumptionRespondBy
        // A policy's answer never goes over a grant service's: one that answered at all (sent, still being sent,
        // refused, without consent) closed the request for the policy. Read once this answer has begun: a grant
        // service's answer begun earlier is in hand (this one refused) or recorded, and one begun later
        // supersedes this (``AnswerSuccession``).
        if byPolicy {
            let environment = environment
            let answered = try await context.retrying("ledger_lookup", stage: metrics.ledgerLookup) {
                try await requests.consumptionRequestAnswered(
                    app: app.scope, environment: environment, transactionID: answer.transactionID)
            }
            if answered {
                metrics.consumptionAnswer("policy_superseded").increment()
                return .publish([])
            }
        }
        var attempts = 0
        let rounds = AppleRetry(
            policy: retry, sleep: { try await context.sleep(for: $0) },
            letGo: { context.mustLetGo || Task.isCancelled })
        while true {
            let ended = try await rounds.run(attempts: &attempts) { attempts -> Round in
                if let respondBy, Date() > respondBy {
                    // Tried and failed until then: Apple's failures, not a late answer.
                    metrics.consumptionAnswer(attempts > 0 ? "failed" : "late").increment()
                    return .done(
                        notSent(
                            attempts > 0
                                ? "Apple did not take it before the request's deadline (respond_by)"
                                : "past the request's deadline (respond_by)", attempts: attempts))
                }
                try context.checkLetGo()
                if succession.isSuperseded(ticket) { return .done(superseded(answer, attempts: attempts)) }
                let sent = try await succession.call(ticket) { [attempts, environment] in
                    var made = attempts
                    let outcome = try await context.traced(
                        "apple send consumption", attributes: [("receipt_worker.app", .string(app.name))]
                    ) {
                        try await api.sendConsumption(
                            transactionID: answer.transactionID, body: body, environment: environment, attempts: &made)
                    }
                    return (outcome, made)
                }
                guard let (outcome, made) = sent else { return .done(superseded(answer, attempts: attempts)) }
                attempts = made
                switch outcome {
                case .accepted:
                    metrics.consumptionAnswer("sent").increment()
                    logger.info(
                        "consumption answer sent",
                        ["transaction_id": answer.transactionID, "delivery_status": delivery])
                    try await markAnswered(answer, scope: app.scope, environment: environment, context: context)
                    return .done(.publish([]))
                case .refused(_, let code) where code == 4040010 && environment == .production && api.allowsSandbox:
                    return .sandboxInstead  // not a production transaction: a sandbox one, where allowed
                case .refused(let status, let code):
                    metrics.consumptionAnswer("refused").increment()
                    try await markAnswered(answer, scope: app.scope, environment: environment, context: context)
                    return .done(
                        notSent(
                            "Apple refused it: HTTP \(status)\(code.map { ", error \($0)" } ?? "")", attempts: attempts)
                    )
                }
            } failed: { error, attempts -> AppleRetry.Next<Disposition> in
                let appleError = error as? AppleVerificationError
                let retriable = appleError?.isRetriable ?? true
                guard retriable, respondBy != nil || retry.mayRetry(afterAttempts: attempts) else {
                    metrics.consumptionAnswer(retriable ? "failed" : "refused").increment()
                    return .stop(notSent(appleError?.reason ?? "\(error)", attempts: attempts))
                }
                return .retry(after: appleError?.retryDelay)
            }
            switch ended {
            case .answered(.done(let outcome)), .stopped(let outcome): return outcome
            case .answered(.sandboxInstead): environment = .sandbox  // asked again at once
            }
        }
    }

    /// How one round of sending an answer ended: with the handler's outcome, or with Apple saying the
    /// transaction is a sandbox one (asked again there at once).
    private enum Round {
        case done(Disposition)
        case sandboxInstead
    }

    /// What the worker tells Apple of the delivery when the grant service's answer says nothing
    /// (docs/contract.md section 9, "Delivery when the answer says none"): delivery is a fact about the content.
    /// `DELIVERED` for a purchase granted to an order and not wholly refunded (a partial refund leaves the player
    /// the rest); `UNDELIVERED_OTHER` for a purchase this ledger never granted; nil (not sent without the grant
    /// service's word) for a purchase credited unclaimed that no order confirmed (the grant service may be holding
    /// it for support), or refunded in all (what the player holds now is not what was delivered).
    package static func deliveryStatus(of grant: GrantRecord?) -> String? {
        guard let grant else { return "UNDELIVERED_OTHER" }
        if grant.isUntiedCredit || grant.whollyRefunded { return nil }
        return "DELIVERED"
    }

    /// Why ``deliveryStatus(of:)`` has no default, in words for the dead letter.
    package static func whyNoDefaultDelivery(_ grant: GrantRecord?) -> String {
        grant?.isUntiedCredit == true
            ? "the purchase was credited unclaimed and no order confirmed it"
            : "the purchase was refunded in all"
    }

    /// Closes the consumption request in the ledger (the oldest-unanswered gauge stops counting it). A value
    /// the ledger refuses for good is logged: Apple has the answer already.
    private func markAnswered(
        _ answer: ConsumptionAnswer, scope: AppScope, environment: AppleEnvironment, context: any HandlingContext
    ) async throws {
        do {
            try await context.retrying("ledger_record") {
                try await requests.answerConsumptionRequest(
                    app: scope, environment: environment, transactionID: answer.transactionID)
            }
        } catch let error as LedgerError {
            logger.warning("cannot mark the consumption request answered", ["error": error.reason])
        }
    }

    /// Without the player's consent an answer is not sent, and that is no failure of anyone's.
    private func withoutConsent(_ answer: ConsumptionAnswer) -> Disposition {
        metrics.consumptionAnswer("no_consent").increment()
        logger.info(
            "consumption answer without the player's consent: not sent", ["transaction_id": answer.transactionID])
        return .publish([])
    }

    /// A newer answer of the same transaction took over: it carries the grant service's word, so this one ends
    /// without a dead letter.
    private func superseded(_ answer: ConsumptionAnswer, attempts: Int) -> Disposition {
        metrics.consumptionAnswer("superseded").increment()
        logger.info(
            "consumption answer superseded by a newer one of the same transaction: not sent",
            ["transaction_id": answer.transactionID, "attempts": String(attempts)])
        return .publish([])
    }

    private func notSent(_ error: String, attempts: Int = 0) -> Disposition {
        .deadLetter(DeadLetter(reason: .consumptionNotSent, error: error, attempts: attempts))
    }
}

extension ConsumptionHandler {
    /// Where an answer was first read: its own place or its `parked_from`'s; for an answer a `dlq replay` put back,
    /// the original's (``ReplayedPlace``): it is as old as the original, whatever the grant service produced since.
    func firstRead(_ message: InboundMessage) -> String {
        ReplayedPlace.original(of: message, own: JobHandler.firstRead(message, retriesTopic: retriesTopic))
    }
}
