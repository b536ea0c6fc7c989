import Foundation
import Observability
import Synchronization

// What tracing costs a job in the worker's own code, apart from the noise of a whole worker: the five spans of a
// sampled job made as the runtime and the handlers make them (a `process` root with its messaging attributes, Apple's
// call, the ledger's two round trips, the `send` of its event), ended, queued, and encoded as OTLP in requests of 512
// spans; and the same job unsampled (its spans draw ids and record nothing). With tracing off (no `otel.endpoint`)
// no span is made at all: these are what tracing adds to a job. CPU time of this process, one thread.
//   span-bench [--jobs N]        (default 200000)

func cpuMicroseconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now)
    return Double(now.tv_sec) * 1e6 + Double(now.tv_nsec) / 1e3
}

let arguments = CommandLine.arguments
let jobs = arguments.firstIndex(of: "--jobs").flatMap { Int(arguments[$0 + 1]) } ?? 200_000

/// The exporter's part: a queue, taken 512 at a time and encoded.
final class Queue: Sendable {
    let spans = Mutex<[FinishedSpan]>([])
    let bytes = Atomic<Int>(0)

    func add(_ span: FinishedSpan) {
        let full = spans.withLock { queue -> [FinishedSpan]? in
            queue.append(span)
            guard queue.count >= 512 else { return nil }
            defer { queue.removeAll(keepingCapacity: true) }
            return queue
        }
        if let full {
            let body = OTLPEncoding.exportRequest(full, service: "receipt-worker", version: "bench")
            bytes.add(body.count, ordering: .relaxed)
        }
    }
}

/// One job's spans, as the worker makes them.
func job(_ tracer: Tracer, _ index: Int) {
    let process = tracer.start(
        "process jobs", kind: .consumer, parent: nil,
        attributes: [
            ("messaging.system", .string("kafka")), ("messaging.destination.name", .string("jobs")),
            ("messaging.kafka.destination.partition", .int(3)), ("messaging.kafka.offset", .int(Int64(index))),
        ])
    let apple = process.child("apple verify", kind: .client)
    apple.end()
    for operation in ["ledger_lookup", "ledger_record"] {
        let ledger = process.child(
            operation, kind: .client, attributes: [("receipt_worker.operation", .string(operation))])
        ledger.end()
    }
    let send = process.child(
        "send results", kind: .producer, attributes: [("messaging.destination.name", .string("results"))])
    _ = send.context.traceparent  // the header the event carries
    send.end()
    process.set("receipt_worker.outcome", .string("published"))
    process.end()
}

func measure(sampleRatio: Double) -> (perJob: Double, bytesPerSpan: Double) {
    let queue = Queue()
    let tracer = Tracer(sampleRatio: sampleRatio) { queue.add($0) }
    for index in 0..<1_000 { job(tracer, index) }  // warm
    let before = cpuMicroseconds()
    let bytesBefore = queue.bytes.load(ordering: .relaxed)
    for index in 0..<jobs { job(tracer, index) }
    let spent = cpuMicroseconds() - before
    let bytes = Double(queue.bytes.load(ordering: .relaxed) - bytesBefore)
    return (spent / Double(jobs), bytes / Double(jobs * 5))
}

let off = measure(sampleRatio: 0)
let on = measure(sampleRatio: 1)
print(
    String(
        format:
            "span-bench: %d jobs; tracing's CPU a job: sampled %.2f us (5 spans made, ended, queued, encoded: %.2f us a span), unsampled %.2f us (ids drawn, nothing recorded); %.0f bytes of OTLP a span",
        jobs, on.perJob, on.perJob / 5, off.perJob, on.bytesPerSpan))
