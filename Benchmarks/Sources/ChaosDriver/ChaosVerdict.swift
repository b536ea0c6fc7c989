import Foundation

/// What the chaos run's answers show, against what the contract requires of each group.
struct ChaosVerdict {
    var jobs = 0
    var unanswered: [String] = []
    var grantedTwice: [String] = []
    var genuineDenied: [String] = []
    var wrongReasons: [String] = []
    var newEventIDs: [String] = []
    var deadLetters: [String: Int] = [:]
    var decisions: [String: Int] = [:]

    /// `results` by job id (every event seen, in order); `deadLettered` the job ids found in the DLQ.
    init(groups: [ChaosGroup], results: [String: [[String: Any]]], deadLettered: [String: String]) {
        var grantsByPurchase: [String: Set<String>] = [:]
        for events in results.values {
            for event in events where event["decision"] as? String == "grant" {
                let purchase = (event["original_transaction_id"] as? String) ?? (event["transaction_id"] as? String)
                if let purchase, let order = event["order_id"] as? String {
                    grantsByPurchase[purchase, default: []].insert(order)
                }
            }
        }
        grantedTwice = grantsByPurchase.filter { $0.value.count > 1 }.map { "\($0.key): \($0.value.sorted())" }
        for reason in deadLettered.values { deadLetters[reason, default: 0] += 1 }

        for group in groups {
            let ids = Array(Set(group.jobs.map(\.jobID)))
            jobs += group.jobs.count
            var firsts: [String: (decision: String, reason: String)] = [:]
            for id in ids {
                let events = results[id] ?? []
                if Set(events.compactMap { $0["event_id"] as? String }).count > 1 { newEventIDs.append(id) }
                if let first = events.first {
                    let decision = first["decision"] as? String ?? "?"
                    let reason = first["reason"] as? String ?? "?"
                    firsts[id] = (decision, reason)
                    decisions["\(decision) \(reason)", default: 0] += 1
                } else if deadLettered[id] == nil {
                    unanswered.append(id)
                }
            }
            let answered = firsts.values
            switch group.kind {
            case .receipt, .signed, .transactionID, .redelivery:
                for (id, answer) in firsts where answer.decision != "grant" {
                    genuineDenied.append("\(id): \(answer.reason)")
                }
            case .replay, .restore:
                guard answered.count == ids.count else { continue }
                if !answered.contains(where: { $0.decision == "grant" }) {
                    genuineDenied.append("\(ids.sorted()): \(answered.map(\.reason))")
                }
                for (id, answer) in firsts where answer.decision == "deny" && answer.reason != "duplicate_transaction" {
                    wrongReasons.append("\(id): \(answer.reason), expected duplicate_transaction")
                }
            case .sandbox, .swap:
                let expected = group.kind == .sandbox ? "sandbox_not_allowed" : "product_mismatch"
                for (id, answer) in firsts where answer.reason != expected {
                    wrongReasons.append("\(id): \(answer.decision) \(answer.reason), expected \(expected)")
                }
            }
        }
    }

    var failed: Bool {
        !unanswered.isEmpty || !grantedTwice.isEmpty || !genuineDenied.isEmpty || !wrongReasons.isEmpty
            || !newEventIDs.isEmpty
    }

    var report: String {
        func line(_ name: String, _ items: [String]) -> String {
            "\(name): \(items.count)" + (items.isEmpty ? "" : "  e.g. \(items.prefix(3).joined(separator: "; "))")
        }
        return [
            "jobs: \(jobs)",
            line("jobs without an answer", unanswered),
            line("purchases granted to two orders", grantedTwice),
            line("genuine purchases denied", genuineDenied),
            line("wrong deny reasons", wrongReasons),
            line("redeliveries with a new event_id", newEventIDs),
            "dead letters: \(deadLetters.isEmpty ? "0" : deadLetters.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))",
            "decisions: \(decisions.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))",
        ].joined(separator: "\n")
    }
}
