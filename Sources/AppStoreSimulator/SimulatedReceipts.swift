import AppleVerification
import Crypto
import Foundation

/// App receipts as Apple makes them: a PKCS#7 signed-data whose content is the receipt's ASN.1 attribute
/// SET (here signed by the simulator's test chain), and iOS 6 transaction receipts as base64 plists.
enum SimulatedReceipts {
    /// The app receipt of `purchases` (each an in-app attribute), base64. Its type (attribute 0) is Apple's for
    /// the environment: `ProductionSandbox` for a Sandbox receipt, `Production` otherwise.
    static func appReceipt(
        bundleID: String, environment: String, purchases: [Purchase], created: Date, signer: PKCS7Signer
    ) throws -> String {
        var attributes = [
            attribute(0, utf8(environment == "Sandbox" ? "ProductionSandbox" : "Production")),
            attribute(2, utf8(bundleID)), attribute(3, utf8("1")), attribute(19, utf8("1")),
            attribute(12, ia5(time(created))),
        ]
        for purchase in purchases {
            var fields = [
                attribute(1701, integer(purchase.quantity)), attribute(1702, utf8(purchase.productID)),
                attribute(1703, utf8(purchase.transactionID)), attribute(1704, ia5(time(purchase.purchaseDate))),
                attribute(1705, utf8(purchase.originalTransactionID)),
                attribute(1706, ia5(time(purchase.purchaseDate))),
            ]
            if let expires = purchase.expiresDate { fields.append(attribute(1708, ia5(time(expires)))) }
            attributes.append(attribute(17, element(0x31, fields.flatMap { $0 })))
        }
        return try signer.sign(element(0x31, attributes.flatMap { $0 })).base64EncodedString()
    }

    /// An iOS 6 `transactionReceipt`: an old-style plist with `purchase-info` (itself a base64 plist naming
    /// the transaction) and a signature Apple's servers alone can check; random, so each is unique.
    static func transactionReceipt(_ purchase: Purchase) -> String {
        let info = Data(
            "{ \"transaction-id\" = \"\(purchase.transactionID)\"; \"product-id\" = \"\(purchase.productID)\"; }".utf8)
        let signature = Data((0..<64).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let plist =
            "{ \"signature\" = \"\(signature)\"; \"purchase-info\" = \"\(info.base64EncodedString())\"; "
            + "\"environment\" = \"\(purchase.environment)\"; }"
        return Data(plist.utf8).base64EncodedString()
    }

    // DER, as much as a receipt needs.

    /// `SEQUENCE { INTEGER type, INTEGER version, OCTET STRING value }`.
    private static func attribute(_ type: Int, _ value: [UInt8]) -> [UInt8] {
        element(0x30, integer(type) + integer(1) + element(0x04, value))
    }

    private static func utf8(_ text: String) -> [UInt8] { element(0x0C, Array(text.utf8)) }
    private static func ia5(_ text: String) -> [UInt8] { element(0x16, Array(text.utf8)) }

    private static func integer(_ value: Int) -> [UInt8] {
        var bytes = withUnsafeBytes(of: value.bigEndian, Array.init)
        while bytes.count > 1, bytes[0] == 0 && bytes[1] & 0x80 == 0 || bytes[0] == 0xFF && bytes[1] & 0x80 != 0 {
            bytes.removeFirst()
        }
        return element(0x02, bytes)
    }

    private static func element(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        var length: [UInt8] = []
        if content.count < 0x80 {
            length = [UInt8(content.count)]
        } else {
            var count = content.count
            while count > 0 {
                length.insert(UInt8(count & 0xFF), at: 0)
                count >>= 8
            }
            length.insert(0x80 | UInt8(length.count), at: 0)
        }
        return [tag] + length + content
    }

    private static func time(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: date)
    }
}
