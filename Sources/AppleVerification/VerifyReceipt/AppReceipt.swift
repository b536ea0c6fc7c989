import Crypto
import Foundation
public import Vocabulary

/// An app receipt (iOS 7+) read locally: the PKCS#7 container, its signature, and the fields the worker may
/// need before Apple answers. Verification of purchases still goes through verifyReceipt: this reader only
/// lets a receipt be inspected and its signer checked, as Apple's `ReceiptUtility` does.
public struct AppReceipt: Sendable {
    public struct InApp: Sendable, Hashable {
        public var quantity: Int?
        public var productID: String?
        public var transactionID: String?
        public var originalTransactionID: String?
        public var purchaseDate: String?
        public var expiresDate: String?
        public var cancellationDate: String?
    }

    public var bundleID: String?
    /// Attribute 0, the receipt type Apple signs into it: `Production`, `ProductionSandbox` (a TestFlight or
    /// sandbox tester's receipt), `Xcode`, ... Nil when the receipt has none.
    public var receiptType: String?
    public var appVersion: String?
    /// Attribute 12, RFC 3339 (`2015-08-12T07:50:46Z`): when Apple made the receipt.
    public var creationDate: String?
    public var inApp: [InApp]

    /// The environment the receipt type names: Production for `Production` (and `ProductionVPP`), Sandbox for
    /// the sandbox types (`ProductionSandbox`, `ProductionVPPSandbox`), Xcode for Xcode's; nil when the
    /// receipt names none or a type not known here.
    public var environment: AppleEnvironment? {
        switch receiptType {
        case "Production", "ProductionVPP": .production
        case "ProductionSandbox", "ProductionVPPSandbox", "Sandbox": .sandbox
        case "Xcode": .xcode
        default: nil
        }
    }

    /// Parses a base64 receipt. Nil when it is not a PKCS#7 app receipt.
    public init?(base64 text: String) {
        guard let der = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)),
            let payload = Self.payload(der)
        else { return nil }
        self.init(payload: payload)
    }

    /// Reads the signed content of a receipt, the DER of its attribute SET, without the PKCS#7 around it.
    /// Attributes it cannot read are skipped; bytes that are not a SET give a receipt without fields.
    package init(payload: [UInt8]) {
        var bundleID: String?
        var receiptType: String?
        var appVersion: String?
        var creationDate: String?
        var inApp: [InApp] = []
        for (type, value) in Self.attributes(payload) {
            switch type {
            case 0: receiptType = ASN1Reader.string(value)
            case 2: bundleID = ASN1Reader.string(value)
            case 3: appVersion = ASN1Reader.string(value)
            case 12: creationDate = ASN1Reader.string(value)
            case 17: inApp.append(Self.inAppEntry(value))
            default: break
            }
        }
        self.bundleID = bundleID
        self.receiptType = receiptType
        self.appVersion = appVersion
        self.creationDate = creationDate
        self.inApp = inApp
    }

    /// Whether the receipt's PKCS#7 signature chains to one of `roots` (DER or PEM). With `checkTime` false,
    /// certificate validity dates are ignored (old receipts whose intermediates have since expired).
    ///
    /// Not Apple's word on its own: any developer's certificate chains to Apple's root. Only
    /// ``ReceiptSignatureVerifier`` (Apple's OIDs, a path of three) says a receipt is Apple's; this stays internal,
    /// for tests of the signature alone.
    static func verifySignature(base64 text: String, roots: [Data], checkTime: Bool) -> Bool {
        guard let der = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)),
            let container = PKCS7SignedData(der: der)
        else { return false }
        var certificates: [X509Certificate] = []
        for root in roots {
            guard let certificate = try? X509Certificate(bytes: root) else { return false }
            certificates.append(certificate)
        }
        return container.verifies(roots: certificates, checkTime: checkTime)
    }

    /// The signed content: the DER of the receipt's attribute SET.
    private static func payload(_ der: Data) -> [UInt8]? { PKCS7SignedData(der: der)?.content }

    private static func attributes(_ set: [UInt8]) -> [(Int, ArraySlice<UInt8>)] {
        var outer = ASN1Reader(set[...])
        guard let container = outer.next(), container.tag == 0x31 else { return [] }
        var reader = ASN1Reader(container.content)
        var result: [(Int, ArraySlice<UInt8>)] = []
        while !reader.isAtEnd, let sequence = reader.next() {
            var fields = ASN1Reader(sequence.content)
            guard let type = fields.next(), type.tag == 0x02, let number = ASN1Reader.integer(type.content),
                fields.next() != nil, let value = fields.next(), value.tag == 0x04
            else { continue }
            result.append((number, value.content))
        }
        return result
    }

    private static func inAppEntry(_ value: ArraySlice<UInt8>) -> InApp {
        var entry = InApp()
        for (type, field) in attributes(Array(value)) {
            switch type {
            case 1701:
                var reader = ASN1Reader(field)
                entry.quantity = reader.next().flatMap { ASN1Reader.integer($0.content) }
            case 1702: entry.productID = ASN1Reader.string(field)
            case 1703: entry.transactionID = ASN1Reader.string(field)
            case 1704: entry.purchaseDate = ASN1Reader.string(field)
            case 1705: entry.originalTransactionID = ASN1Reader.string(field)
            case 1708: entry.expiresDate = ASN1Reader.string(field)
            case 1712: entry.cancellationDate = ASN1Reader.string(field)
            default: break
            }
        }
        return entry
    }
}
