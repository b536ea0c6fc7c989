import COpenSSL

/// Random bytes from OpenSSL's CSPRNG.
package enum Random {
    package static func bytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&bytes, Int32(count)) == 1 else {
            // Without randomness no session, state or nonce is safe: stop rather than make guessable ones.
            fatalError("OpenSSL's random generator failed")
        }
        return bytes
    }

    /// `count` random bytes as base64url text (a state, a nonce, a CSRF token, a PKCE verifier).
    package static func token(_ count: Int = 32) -> String { Base64URL.encode(bytes(count)) }
}
