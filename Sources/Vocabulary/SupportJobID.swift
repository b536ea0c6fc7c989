/// The job id under which `receipt-worker credit` records support's credit of a purchase: `support:` and the
/// transaction id. Reserved: a job from the topic using the prefix is malformed and never stored under it (the
/// ledgers keep these results for good when they prune, and it could meet a real credit's).
public enum SupportJobID {
    public static let prefix = "support:"

    public static func of(transactionID: String) -> String { prefix + transactionID }

    /// Byte for byte, as the ledgers' prune compares it (`Support:` is an ordinary job id).
    public static func isReserved(_ jobID: String) -> Bool { jobID.utf8.starts(with: prefix.utf8) }
}
