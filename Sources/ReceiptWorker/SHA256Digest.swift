import COpenSSL

/// SHA-256 through OpenSSL, for stable ids.
enum SHA256Digest {
    static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        _ = bytes.withUnsafeBufferPointer { input in
            digest.withUnsafeMutableBufferPointer { SHA256(input.baseAddress, input.count, $0.baseAddress) }
        }
        return digest
    }
}
