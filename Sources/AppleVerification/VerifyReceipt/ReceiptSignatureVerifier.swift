import Crypto
public import Foundation
import Vocabulary

/// Reads and verifies an app receipt without verifyReceipt (`apple.receipt_verification=server_api`): its
/// PKCS#7 signature must be by Apple's receipt-signing certificate, which means a leaf carrying Apple's
/// receipt-signing OID, under an intermediate carrying Apple's WWDR OID, under one of the configured roots,
/// each certificate valid at the receipt's creation date (receipts outlive their certificates). The OIDs
/// matter: every developer holds a certificate under the same WWDR intermediate, and without them could
/// sign a receipt that chains to Apple's root.
public struct ReceiptSignatureVerifier: Sendable {
    public enum Verification: Sendable {
        case verified(AppReceipt)
        /// An iOS 6 transaction receipt (a base64 plist): only verifyReceipt reads it.
        case legacy
        /// Not a receipt Apple signed, or not one that can be read: why.
        case invalid(String)
    }

    private let roots: [X509Certificate]

    /// `rootCertificates`: DER or PEM. Default in the configuration: Apple Root CA (``AppleRootCertificates/appleRootCA``).
    public init(rootCertificates: [Data]) throws(AppleVerificationError) {
        var roots: [X509Certificate] = []
        for data in rootCertificates { roots.append(try AppleVerificationError.certificate(data)) }
        self.roots = roots
    }

    public func verify(base64 text: String) -> Verification {
        guard let der = Data(base64Encoded: text, options: .ignoreUnknownCharacters), !der.isEmpty else {
            return .invalid("the receipt is not base64")
        }
        if der.first == UInt8(ascii: "{") { return .legacy }
        guard let container = PKCS7SignedData(der: der) else {
            return .invalid("the receipt is not a PKCS#7 container")
        }
        guard let payload = container.content else { return .invalid("the receipt's signed content is not data") }
        let receipt = AppReceipt(payload: payload)
        guard let created = receipt.creationDate.flatMap(Self.seconds) else {
            return .invalid("the receipt has no readable creation date")
        }
        if let problem = verifySigner(container, at: created) { return .invalid(problem) }
        return .verified(receipt)
    }

    /// Nil when the one signer's chain and signature hold; else why not.
    private func verifySigner(_ container: PKCS7SignedData, at time: time_t) -> String? {
        // The signer certificates are those of the container: a signer without its certificate is refused.
        guard let signers = container.signers else { return "the receipt's signer certificate is not in it" }
        guard signers.count == 1, let leaf = signers.first else {
            return "the receipt has \(signers.count) signers, not 1"
        }
        guard leaf.hasExtension(oid: ChainVerifier.leafOID) else {
            return "the receipt's signer is not Apple's receipt-signing certificate"
        }
        let path: CertificatePath
        do {
            path = try CertificatePath(leaf: leaf, intermediates: container.certificates, roots: roots, at: time)
        } catch {
            return "the receipt's certificate chain is rejected: \(error.reason)"
        }
        guard path.certificates.count == 3, path.certificates[1].hasExtension(oid: ChainVerifier.intermediateOID)
        else { return "the receipt's chain is not leaf, Apple's WWDR intermediate, root" }
        // The chain is verified above; this checks the signature over the content with the leaf's key.
        guard container.signatureVerifies else { return "the receipt's signature does not verify" }
        return nil
    }

    /// `2015-08-12T07:50:46Z`, with or without fractional seconds (ignored), as a `time_t`; nil for anything
    /// else, an offset other than `Z` included (Apple writes receipts' times in UTC).
    package static func seconds(_ text: String) -> time_t? {
        guard text.utf8.last == UInt8(ascii: "Z"), let date = RFC3339.parse(text) else { return nil }
        return time_t(exactly: date.timeIntervalSince1970.rounded(.down))
    }
}
