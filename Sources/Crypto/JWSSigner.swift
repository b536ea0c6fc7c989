public import Foundation
import Vocabulary

/// Makes compact ES256 JWS: App Store Server API tokens (JWT), and, in the App Store simulator and tests,
/// signed transactions with an `x5c` chain as Apple's servers make them.
public struct JWSSigner: Sendable {
    private let key: ECPrivateKey
    private let header: String

    /// `headerFields` are added to `"alg":"ES256"`; `x5c` is the chain, leaf first, as DER.
    public init(key: ECPrivateKey, headerFields: [String: String] = [:], x5c: [Data] = []) throws {
        self.key = key
        var fields = headerFields.mapValues(JSONValue.string)
        fields["alg"] = "ES256"
        if !x5c.isEmpty { fields["x5c"] = JSONValue(x5c.map { $0.base64EncodedString() }) }
        header = Base64URL.encode(JSONValue.object(fields).data)
    }

    public func sign(payload: Data) throws -> String {
        let signingInput = header + "." + Base64URL.encode(payload)
        let signature = try key.signES256(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    public func sign(_ payload: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return try sign(payload: encoder.encode(payload))
    }
}

/// Reads the DER of every certificate in PEM text (or returns DER input as is). Text around the PEM blocks,
/// such as the dump `openssl x509 -text` writes before them, is skipped.
public func certificatesDER(_ bytes: Data) -> [Data] {
    guard isPEM(bytes) else { return [bytes] }
    var result: [Data] = []
    var current = ""
    var inBlock = false
    for line in String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline) {
        if line.hasPrefix("-----BEGIN") {
            current = ""
            inBlock = true
        } else if line.hasPrefix("-----END") {
            if let der = Data(base64Encoded: current) { result.append(der) }
            inBlock = false
        } else if inBlock {
            current += line.trimmingCharacters(in: .whitespaces)
        }
    }
    return result
}

/// Whether the bytes hold PEM text: a `-----BEGIN ` marker anywhere (DER never contains one in practice).
package func isPEM(_ bytes: Data) -> Bool {
    bytes.firstRange(of: Data("-----BEGIN ".utf8)) != nil
}
