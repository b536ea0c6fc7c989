import COpenSSL
import Foundation

/// One public key of a JWKS (an OpenID provider's), as OpenSSL holds it: RSA (RS256) or P-256 (ES256). Built from
/// the JWK's numbers as a DER SubjectPublicKeyInfo (the form every OpenSSL reads), never from a certificate or PEM
/// the provider could smuggle in. Verifies from any number of threads at once (each verification has its own
/// context).
package final class SigningKey: Sendable {
    package enum Algorithm: String, Sendable {
        case rs256 = "RS256"
        case es256 = "ES256"
    }

    package let algorithm: Algorithm
    private let owned: OpenSSLObject
    private var key: OpaquePointer { owned.pointer }

    /// An RSA key from its modulus and exponent (big-endian bytes); 2048 to 8192 bits.
    package convenience init?(rsaModulus modulus: [UInt8], exponent: [UInt8]) {
        let n = Array(modulus.drop(while: { $0 == 0 }))
        guard (256...1024).contains(n.count), !exponent.isEmpty, exponent.count <= 8 else { return nil }
        let rsaEncryption: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01]
        let publicKey = DER.sequence(DER.integer(n) + DER.integer(exponent))
        let info = DER.sequence(DER.sequence(rsaEncryption + [0x05, 0x00]) + DER.bitString(publicKey))
        self.init(spki: info, algorithm: .rs256)
    }

    /// A P-256 key from its coordinates (32 bytes each); OpenSSL checks the point is on the curve.
    package convenience init?(p256X x: [UInt8], y: [UInt8]) {
        guard x.count == 32, y.count == 32 else { return nil }
        // SEQUENCE { SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING { 04 x y } }
        let prefix: [UInt8] = [
            0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A, 0x86, 0x48,
            0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00, 0x04,
        ]
        self.init(spki: prefix + x + y, algorithm: .es256)
    }

    private init?(spki: [UInt8], algorithm: Algorithm) {
        let parsed: OpaquePointer? = spki.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let parsed else {
            ERR_clear_error()
            return nil
        }
        owned = OpenSSLObject(adopting: parsed, free: { EVP_PKEY_free($0) })
        self.algorithm = algorithm
    }

    /// Whether `signature` (RS256: PKCS #1 v1.5; ES256: JWS's raw r‖s) signs SHA-256 of `message`.
    package func verifies(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        let der: [UInt8]
        switch algorithm {
        case .rs256:
            der = signature
        case .es256:
            guard signature.count == 64, let converted = ES256Signature.der(fromRaw: signature) else { return false }
            der = converted
        }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, SHA256Method.fetched, nil, key) == 1 else {
            ERR_clear_error()
            return false
        }
        let result = der.withUnsafeBufferPointer { signature in
            message.withUnsafeBufferPointer { message in
                EVP_DigestVerify(context, signature.baseAddress, signature.count, message.baseAddress, message.count)
            }
        }
        if result != 1 { ERR_clear_error() }
        return result == 1
    }
}

/// The little DER a public key needs.
enum DER {
    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var rest = count
        while rest > 0 {
            bytes.insert(UInt8(rest & 0xFF), at: 0)
            rest >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    static func sequence(_ content: [UInt8]) -> [UInt8] { [0x30] + length(content.count) + content }

    /// A non-negative INTEGER: leading zeros dropped, one put back when the high bit is set.
    static func integer(_ magnitude: [UInt8]) -> [UInt8] {
        var bytes = Array(magnitude.drop(while: { $0 == 0 }))
        if bytes.isEmpty || bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return [0x02] + length(bytes.count) + bytes
    }

    static func bitString(_ content: [UInt8]) -> [UInt8] { [0x03] + length(content.count + 1) + [0x00] + content }
}
