import AppleVerification
import Foundation
import Kafka
import Ledger

extension Worker {
    /// One answer on `topics.consumption`, sent to Apple with Send Consumption Information. Without the
    /// player's consent nothing is sent (Apple refuses it): counted, done. Transient failures are retried
    /// until the request's deadline when the worker saw the request, else within `retry.max_attempts`; an
    /// answer Apple refuses, or one that runs out of time or attempts, goes to the DLQ
    /// (`consumption_not_sent`).
    func handleConsumptionAnswer(_ ticket: JobTicket) async -> JobEnd {
        let answer: ConsumptionAnswer
        switch ConsumptionAnswer.parse(ticket.message.value) {
        case .success(let parsed): answer = parsed
        case .failure(let malformed):
            return await deadLetter(
                ticket, reason: "consumption_not_sent", error: "malformed consumption answer: \(malformed.reason)",
                attempts: 0)
        }
        guard answer.customerConsented else {
            metrics.consumptionAnswer("no_consent").increment()
            logger.info(
                "consumption answer without the player's consent: not sent", ["transaction_id": answer.transactionID])
            return .answered
        }
        let found: GrantRecord?
        switch await retrying(
            "ledger_lookup", ticket, stage: metrics.ledgerLookup,
            { try await self.ledger.grant(purchaseID: nil, transactionID: answer.transactionID) })
        {
        case .success(let record?): found = record
        case .success(nil): return .redeliver
        case .failure(let failure):
            return await deadLetter(ticket, reason: "consumption_not_sent", error: failure.reason, attempts: 0)
        }
        // The answer goes with the credentials of the app the purchase was granted for; an answer naming another
        // is a grant service's mistake that would send the transaction with the wrong app's key. Only when the
        // grant does not say its app (none found, or recorded before events carried bundle_id) does the answer's
        // bundle_id choose, else the default app.
        let granted = found?.grantedEvent
        let grantedBundle = granted?["bundle_id"] as? String
        if let named = answer.bundleID, let grantedBundle, !named.utf8.elementsEqual(grantedBundle.utf8) {
            return await deadLetter(
                ticket, reason: "consumption_not_sent",
                error: "bundle_id \(named) is not the app the purchase was granted for (\(grantedBundle))", attempts: 0)
        }
        let bundleID = grantedBundle ?? answer.bundleID
        guard let app = apps.app(bundleID: bundleID) else {
            return await deadLetter(
                ticket, reason: "consumption_not_sent",
                error: "no configured app has bundle_id \(bundleID ?? "")", attempts: 0)
        }
        guard let api = app.verifier.api else {
            return await deadLetter(
                ticket, reason: "consumption_not_sent",
                error: "no App Store Server API key is configured for app \(app.name) (apple.api.*)", attempts: 0)
        }
        let delivery = answer.deliveryStatus ?? (found.map { !$0.revoked } == true ? "DELIVERED" : "UNDELIVERED_OTHER")
        let body = answer.appleBody(deliveryStatus: delivery)
        var environment: AppleEnvironment = granted?["environment"] as? String == "Sandbox" ? .sandbox : .production
        let respondBy = found?.consumptionRespondBy
        var attempts = 0
        while true {
            if let respondBy, Date() > respondBy {
                metrics.consumptionAnswer("late").increment()
                return await deadLetter(
                    ticket, reason: "consumption_not_sent", error: "past the request's deadline (respond_by)",
                    attempts: attempts)
            }
            if mustLetGo(ticket) { return .redeliver }
            let before = attempts
            do {
                switch try await api.sendConsumption(
                    transactionID: answer.transactionID, body: body, environment: environment, attempts: &attempts)
                {
                case .accepted:
                    metrics.consumptionAnswer("sent").increment()
                    logger.info(
                        "consumption answer sent",
                        ["transaction_id": answer.transactionID, "delivery_status": delivery])
                    return await markAnswered(ticket, answer.transactionID)
                case .refused(_, let code)
                where code == 4040010 && environment == .production && api.configuration.allowSandbox:
                    environment = .sandbox  // not a production transaction: a sandbox one, where allowed
                case .refused(let status, let code):
                    metrics.consumptionAnswer("refused").increment()
                    let end = await markAnswered(ticket, answer.transactionID)
                    guard end == .answered else { return end }
                    return await deadLetter(
                        ticket, reason: "consumption_not_sent",
                        error: "Apple refused it: HTTP \(status)\(code.map { ", error \($0)" } ?? "")",
                        attempts: attempts)
                }
            } catch {
                if mustLetGo(ticket) || Task.isCancelled { return .redeliver }
                attempts = max(attempts, before + 1)
                let appleError = error as? AppleVerificationError
                let retriable = appleError?.isRetriable ?? true
                guard retriable, respondBy != nil || configuration.retry.mayRetry(afterAttempts: attempts) else {
                    metrics.consumptionAnswer(retriable ? "failed" : "refused").increment()
                    return await deadLetter(
                        ticket, reason: "consumption_not_sent", error: appleError?.reason ?? "\(error)",
                        attempts: attempts)
                }
                try? await Task.sleep(
                    for: configuration.retry.delay(afterAttempts: attempts, retryAfter: appleError?.retryDelay))
            }
        }
    }

    /// Closes the consumption request in the ledger (the oldest-unanswered gauge stops counting it).
    private func markAnswered(_ ticket: JobTicket, _ transactionID: String) async -> JobEnd {
        switch await retrying(
            "ledger_record", ticket, { try await self.ledger.answerConsumptionRequest(transactionID: transactionID) })
        {
        case .success(_?): return .answered
        case .success(nil): return .redeliver
        case .failure(let failure):
            logger.warning("cannot mark the consumption request answered", ["error": failure.reason])
            return .answered
        }
    }

    /// Refreshes `receipt_worker_consumption_request_oldest_unanswered_seconds` every 30 s.
    func consumptionGaugeLoop() async {
        while !Task.isCancelled && !isStopping {
            // A ledger that does not answer leaves the last value: an alarm must not clear itself.
            do {
                let oldest = try await ledger.oldestOpenConsumptionRequest()
                metrics.oldestConsumptionRequest.set(oldest.map { max(0, Int(Date().timeIntervalSince($0))) } ?? 0)
            } catch {}
            try? await Task.sleep(for: .seconds(30))
        }
    }
}
