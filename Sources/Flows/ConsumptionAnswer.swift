public import Foundation

/// A grant service's answer to a consumption (refund) request: a message on `topics.consumption`
/// (docs/contract.md). Unknown fields are ignored; a wrong type or value makes the message malformed.
package struct ConsumptionAnswer: Sendable, Equatable {
    package static let deliveryStatuses: Set<String> = [
        "DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE",
        "UNDELIVERED_OTHER",
    ]
    package static let refundPreferences: Set<String> = ["DECLINE", "GRANT_FULL", "GRANT_PRORATED"]

    package var transactionID: String
    package var customerConsented: Bool
    package var sampleContentProvided: Bool
    package var deliveryStatus: String?
    /// 0 to 100.
    package var consumptionPercentage: Double?
    package var refundPreference: String?
    /// Which configured app's purchase: must be the app it was granted for, and chooses only when the grant does
    /// not say its app; nil: the app it was granted for, else the default app.
    package var bundleID: String? = nil

    package struct Malformed: Error, Equatable {
        let reason: String
    }

    /// The answer, or why it is malformed.
    package static func parse(_ bytes: [UInt8]) -> Result<ConsumptionAnswer, Malformed> {
        guard bytes.count <= 16_384 else { return .failure(Malformed(reason: "larger than 16 KB")) }
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: Data(bytes))
        } catch {
            return .failure(Malformed(reason: "not a consumption answer: \(Self.describe(error))"))
        }
        guard let id = wire.transactionID, (1...64).contains(id.utf8.count),
            id.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return .failure(Malformed(reason: "transaction_id must be 1 to 64 digits")) }
        guard let consented = wire.customerConsented else {
            return .failure(Malformed(reason: "customer_consented is required"))
        }
        guard let sample = wire.sampleContentProvided else {
            return .failure(Malformed(reason: "sample_content_provided is required"))
        }
        if let status = wire.deliveryStatus, !deliveryStatuses.contains(status) {
            return .failure(
                Malformed(reason: "delivery_status must be one of \(deliveryStatuses.sorted().joined(separator: ", "))")
            )
        }
        if let percentage = wire.consumptionPercentage, !(percentage.isFinite && (0...100).contains(percentage)) {
            return .failure(Malformed(reason: "consumption_percentage must be from 0 to 100"))
        }
        if let preference = wire.refundPreference, !refundPreferences.contains(preference) {
            return .failure(
                Malformed(
                    reason: "refund_preference must be one of \(refundPreferences.sorted().joined(separator: ", "))"))
        }
        // Only what is sent: an answer without consent sends nothing, and closes the request whatever its fields.
        if consented, let problem = Self.refusedTogether(wire) { return .failure(Malformed(reason: problem)) }
        if let bundle = wire.bundleID, !(1...255).contains(bundle.utf8.count) || JobParser.hasControlCharacters(bundle)
        {
            return .failure(
                Malformed(reason: "bundle_id must be a string of 1 to 255 bytes without control characters"))
        }
        return .success(
            ConsumptionAnswer(
                transactionID: id, customerConsented: consented, sampleContentProvided: sample,
                deliveryStatus: wire.deliveryStatus, consumptionPercentage: wire.consumptionPercentage,
                refundPreference: wire.refundPreference, bundleID: wire.bundleID))
    }

    /// Fields Apple refuses together (Send Consumption Information answers 400), each valid alone: a consumed share
    /// other than 0 with a delivery status other than DELIVERED (UndeliveredConsumptionPercentageNonZeroError), and
    /// GRANT_PRORATED with a share of 0 or 100 (Apple's `consumptionPercentage`: above 0 and below 100,000
    /// milliunits). Refused at intake, so nothing is sent and the request stays open for a corrected answer.
    private static func refusedTogether(_ wire: Wire) -> String? {
        guard let milliunits = wire.consumptionPercentage.map(Self.milliunits) else { return nil }
        if let status = wire.deliveryStatus, refusesShare(wire.consumptionPercentage, delivery: status) {
            return "consumption_percentage must be 0 when delivery_status is \(status): Apple refuses any other"
        }
        if wire.refundPreference == "GRANT_PRORATED", !(1..<100_000).contains(milliunits) {
            return "consumption_percentage must be above 0 and below 100 with GRANT_PRORATED (Apple refuses 0 and"
                + " 100), or left out"
        }
        return nil
    }

    /// A share from 0 to 100 in Apple's milliunits (12.5 % is 12,500).
    package static func milliunits(_ percentage: Double) -> Int { Int((percentage * 1000).rounded()) }

    /// Whether Apple refuses `percentage` beside `delivery` (UndeliveredConsumptionPercentageNonZeroError): a share
    /// other than 0, in milliunits, with a delivery status other than DELIVERED. Checked on the status the answer
    /// gives as it is read, and on the one the ledger gives before it is sent.
    package static func refusesShare(_ percentage: Double?, delivery: String) -> Bool {
        guard delivery != "DELIVERED", let percentage else { return false }
        return milliunits(percentage) != 0
    }

    /// Apple's `ConsumptionRequest` body (Send Consumption Information): percentages in milliunits.
    package func appleBody(deliveryStatus: String) -> Data {
        var out = "{\"customerConsented\":\(customerConsented),\"sampleContentProvided\":\(sampleContentProvided)"
        out += ",\"deliveryStatus\":\"\(deliveryStatus)\""
        if let consumptionPercentage {
            out += ",\"consumptionPercentage\":\(Self.milliunits(consumptionPercentage))"
        }
        if let refundPreference { out += ",\"refundPreference\":\"\(refundPreference)\"" }
        return Data((out + "}").utf8)
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.typeMismatch(_, let context), DecodingError.dataCorrupted(let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? "not a JSON object" : "\(path) has the wrong type"
        default: return "not a JSON object"
        }
    }

    private struct Wire: Decodable {
        let transactionID: String?
        let customerConsented: Bool?
        let sampleContentProvided: Bool?
        let deliveryStatus: String?
        let consumptionPercentage: Double?
        let refundPreference: String?
        let bundleID: String?

        enum CodingKeys: String, CodingKey {
            case transactionID = "transaction_id", customerConsented = "customer_consented"
            case sampleContentProvided = "sample_content_provided", deliveryStatus = "delivery_status"
            case consumptionPercentage = "consumption_percentage", refundPreference = "refund_preference"
            case bundleID = "bundle_id"
        }
    }
}

/// Checks a consumption answer as the worker will read it (for `receipt-worker consumption answer`).
public enum ConsumptionAnswerCheck {
    /// Nil when `value` is a valid answer, else why not.
    public static func problem(in value: [UInt8]) -> String? {
        switch ConsumptionAnswer.parse(value) {
        case .success: nil
        case .failure(let malformed): malformed.reason
        }
    }

    /// What Send Consumption Information would be sent for a valid answer (its delivery status, else
    /// DELIVERED); nil for an invalid one. For the fuzz target: whatever the answer, Apple gets JSON.
    public static func appleBody(for value: [UInt8]) -> Data? {
        guard case .success(let answer) = ConsumptionAnswer.parse(value) else { return nil }
        return answer.appleBody(deliveryStatus: answer.deliveryStatus ?? "DELIVERED")
    }
}
