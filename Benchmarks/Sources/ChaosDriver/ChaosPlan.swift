import Foundation
import HTTPClient

/// One scenario of the chaos run: the jobs it submits and the answer the contract requires of them.
struct ChaosGroup: Codable, Sendable {
    enum Kind: String, Codable, Sendable, CaseIterable {
        /// A genuine purchase, by receipt, signed transaction or transaction id: granted.
        case receipt, signed, transactionID = "transaction_id"
        /// One receipt presented for two orders: one grant, one duplicate_transaction.
        case replay
        /// A non-consumable and its StoreKit 1 restore (a new transaction id) for two orders: one grant.
        case restore
        /// A sandbox receipt: sandbox_not_allowed.
        case sandbox
        /// A cheap product's receipt and transaction id for an expensive order: product_mismatch.
        case swap
        /// A genuine job submitted twice: the same decision and event id both times.
        case redelivery
    }

    struct Job: Codable, Sendable {
        let jobID: String
        let orderID: String
        let value: String
    }

    let kind: Kind
    let jobs: [Job]
}

/// Builds the groups: purchases in the simulator's admin API, jobs that present them.
struct ChaosPlanner: Sendable {
    let simulator: String
    let http: HTTPClient
    let run: String

    func purchase(_ fields: [String: Any]) async throws -> [String: String] {
        let response = try await http.execute(
            HTTPRequest(
                method: .post, url: "\(simulator)/admin/purchases",
                body: try JSONSerialization.data(withJSONObject: fields)))
        guard response.status == 201,
            let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        else { throw ChaosError("the simulator refused a purchase: HTTP \(response.status)") }
        return object.compactMapValues { $0 as? String }
    }

    func job(_ id: String, order: String, product: String, _ proof: [String: String]) throws -> ChaosGroup.Job {
        var fields: [String: String] = ["job_id": id, "order_id": order, "user_id": "player-\(order)"]
        fields["product_id"] = product
        fields.merge(proof) { $1 }
        let data = try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
        return ChaosGroup.Job(jobID: id, orderID: order, value: String(decoding: data, as: UTF8.self))
    }

    func group(_ kind: ChaosGroup.Kind, index: Int) async throws -> ChaosGroup {
        let id = "\(run)-\(kind.rawValue)-\(index)"
        let token = UUID().uuidString.lowercased()
        switch kind {
        case .receipt, .redelivery:
            let bought = try await purchase(["product_id": "coins.100"])
            let job = try job(id, order: "o-\(id)", product: "coins.100", ["receipt": bought["receipt"] ?? ""])
            return ChaosGroup(kind: kind, jobs: kind == .redelivery ? [job, job] : [job])
        case .signed:
            let bought = try await purchase(["product_id": "coins.100"])
            return ChaosGroup(
                kind: kind,
                jobs: [
                    try job(
                        id, order: "o-\(id)", product: "coins.100",
                        ["signed_transaction": bought["signed_transaction"] ?? ""])
                ])
        case .transactionID:
            let bought = try await purchase(["product_id": "coins.100", "app_account_token": token])
            return ChaosGroup(
                kind: kind,
                jobs: [
                    try job(
                        id, order: "o-\(id)", product: "coins.100",
                        ["transaction_id": bought["transaction_id"] ?? "", "app_account_token": token])
                ])
        case .replay:
            let bought = try await purchase(["product_id": "coins.100"])
            let proof = ["receipt": bought["receipt"] ?? ""]
            return ChaosGroup(
                kind: kind,
                jobs: [
                    try job(id + "-a", order: "o-\(id)-a", product: "coins.100", proof),
                    try job(id + "-b", order: "o-\(id)-b", product: "coins.100", proof),
                ])
        case .restore:
            let original = try await purchase(["product_id": "level.pack", "type": "non_consumable"])
            let restored = try await purchase([
                "product_id": "level.pack", "restore_of": original["transaction_id"] ?? "",
            ])
            return ChaosGroup(
                kind: kind,
                jobs: [
                    try job(
                        id + "-a", order: "o-\(id)-a", product: "level.pack", ["receipt": original["receipt"] ?? ""]),
                    try job(
                        id + "-b", order: "o-\(id)-b", product: "level.pack",
                        ["signed_transaction": restored["signed_transaction"] ?? ""]),
                ])
        case .sandbox:
            let bought = try await purchase(["product_id": "coins.100", "environment": "Sandbox"])
            return ChaosGroup(
                kind: kind,
                jobs: [try job(id, order: "o-\(id)", product: "coins.100", ["receipt": bought["receipt"] ?? ""])])
        case .swap:
            let bought = try await purchase(["product_id": "coins.100"])
            return ChaosGroup(
                kind: kind,
                jobs: [
                    try job(
                        id, order: "o-\(id)", product: "gems.5000",
                        ["receipt": bought["receipt"] ?? "", "transaction_id": bought["transaction_id"] ?? ""])
                ])
        }
    }
}

struct ChaosError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
