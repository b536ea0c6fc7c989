/// Why a message went to the dead-letter topic: its `dlq_reason` header (docs/contract.md, section 5).
public enum DeadLetterReason: String, CaseIterable, Sendable, Codable {
    /// The job (or notification record) cannot be read or lacks a required field.
    case malformedJob = "malformed_job"
    /// Apple kept failing transiently until `retry.max_attempts`.
    case retriesExhausted = "retries_exhausted"
    /// Apple cannot verify this proof here (no key for the app, a configuration Apple refuses).
    case cannotVerify = "cannot_verify"
    /// A grant service's answer to a consumption request did not reach Apple.
    case consumptionNotSent = "consumption_not_sent"
}
