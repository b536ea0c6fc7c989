/// The DLQ's `dlq_reason` values (docs/contract.md, section 5).
public enum DeadLetterReasons {
    public static let all = ["malformed_job", "retries_exhausted", "cannot_verify", "consumption_not_sent"]
}
