# A client writing one grant a transaction beside a migration (scripts/bench-migration.sh), timing each;
# writes "COUNT WORST_SECONDS" to OUT after every one.   python3 migration-writer.py URL OUT
import subprocess, sys, time
url, out = sys.argv[1:]
proc = subprocess.Popen(["psql", url, "-qtAX", "-v", "ON_ERROR_STOP=0"], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, text=True, bufsize=1)
worst, count, i = 0.0, 0, 0
try:
    while True:
        i += 1
        started = time.monotonic()
        proc.stdin.write(f"INSERT INTO receipt_worker.grants (app, environment, transaction_id, order_id, purchase_id,"
                         f" user_id, product_id, quantity, event) VALUES ('', 'Production', 'beside-{i}', 'beside-{i}',"
                         f" 'beside-{i}', 'u', 'p', 1, NULL); SELECT 1;\n")
        proc.stdin.flush()
        proc.stdout.readline()
        worst = max(worst, time.monotonic() - started)
        count += 1
        with open(out, "w") as f:
            f.write(f"{count} {worst}\n")
        time.sleep(0.01)
except (BrokenPipeError, KeyboardInterrupt):
    pass
