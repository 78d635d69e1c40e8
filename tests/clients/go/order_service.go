// order_service: the Go reference client of the seckill contract (issue 51).
//
// A small order service that sells through lua/deduct.lua and writes its orders to PostgreSQL
// exactly as docs/app-servers.md (the app-server guide) says, with faults injected on purpose:
// lost replies (unknown outcomes) and crashes between a deduction and its order. After a run,
// the console's `compensation resolve A --all` and `fix A --yes` must leave every product `ok`.
//
// Each step names the guide's call sequence it follows: "Sale", "Unknown outcome",
// "Order insert failed", "Payment", "Expiry / cancellation", "Crash". See README.md here.
package main

import (
	"bytes"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/lib/pq"
)

// config is the command line.
type config struct {
	redisAddr, dbURL, activity, prefix, luaDir string
	products                                   []string
	buyers, concurrency, purchases             int
	seed                                       int64
	faultTimeout, faultCrash                   float64
	pay, expire, cancel                        float64
}

// maxRetries bounds the retries of one unknown outcome ("Unknown outcome": bounded, with backoff).
const maxRetries = 3

// service holds what every buyer goroutine shares.
type service struct {
	cfg     config
	pool    *redis.Pool
	db      *sql.DB
	deduct  *redis.Script
	restore *redis.Script
	nonce   string // this run's random part of every request id
	seq     int64  // atomic: the request counter of this run
	stats   stats
}

// stats is the summary line. Counters are atomics; replies is guarded by mu.
type stats struct {
	mu         sync.Mutex
	replies    map[string]int64 // the final outcome of each request: "sold", "-1".."-8", "error", "unknown"
	requests   int64
	lost       int64 // replies the fault injection threw away (or requests it never sent)
	retries    int64
	compRows   int64 // compensation rows inserted (not counting a second insert the UNIQUE ignored)
	gaveUp     int64
	crashes    int64
	written    int64 // orders this run inserted
	already    int64 // orders a retry found already written (UNIQUE on request_id)
	insertFail int64 // order transactions that surely rolled back (then restored)
	commitLost int64 // commits whose outcome is unknown (left to the console's fix)
	paid       int64
	expired    int64
	cancelled  int64
	restored   int64 // units restore.lua gave back
	restoreOdd int64 // restore.lua replies other than > 0 (0, -1, -6, ...)
	bugs       int64 // -4, error replies, unexpected database errors
}

func (s *stats) reply(code string) {
	s.mu.Lock()
	s.replies[code]++
	s.mu.Unlock()
}

// purchase is one attempt to buy: one request id, never reused ("Sale": a new request id,
// unique across the whole activity, never reused for another product or another purchase).
type purchase struct {
	requestID, orderID, product, user string
	quantity                          int
}

func main() {
	cfg := parseFlags()
	svc, err := newService(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "order_service:", err)
		os.Exit(2)
	}
	defer svc.pool.Close()
	defer svc.db.Close()

	// C goroutines take the N buyers from a channel; each has its own seeded generator.
	buyers := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < cfg.concurrency; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(cfg.seed*1000003 + int64(w)))
			for k := range buyers {
				svc.buyer(rng, fmt.Sprintf("u%d", k))
			}
		}(w)
	}
	for k := 1; k <= cfg.buyers; k++ {
		buyers <- k
	}
	close(buyers)
	wg.Wait()

	svc.printSummary()
	if atomic.LoadInt64(&svc.stats.bugs) > 0 {
		os.Exit(1)
	}
}

func parseFlags() config {
	var c config
	var products string
	// The scripts' default place: <repo>/lua, three levels above this source file.
	_, src, _, _ := runtime.Caller(0)
	flag.StringVar(&c.redisAddr, "redis", "127.0.0.1:6379", "Redis host:port")
	flag.StringVar(&c.dbURL, "db", "", "PostgreSQL URL (postgres://user@host:port/db?sslmode=disable)")
	flag.StringVar(&c.activity, "activity", "", "activity id")
	flag.StringVar(&products, "products", "", "product ids, comma-separated")
	flag.IntVar(&c.buyers, "buyers", 100, "buyers u1..uN")
	flag.IntVar(&c.concurrency, "concurrency", 8, "goroutines")
	flag.IntVar(&c.purchases, "purchases", 2, "purchase attempts per buyer (each a new request id)")
	flag.Int64Var(&c.seed, "seed", 1, "random seed (request ids still differ between runs)")
	flag.StringVar(&c.prefix, "prefix", "seckill", "key prefix")
	flag.StringVar(&c.luaDir, "lua", filepath.Join(filepath.Dir(src), "..", "..", "..", "lua"), "directory of deduct.lua and restore.lua")
	flag.Float64Var(&c.faultTimeout, "fault-timeout", 0.05, "probability that a deduction's reply is lost")
	flag.Float64Var(&c.faultCrash, "fault-crash", 0.02, "probability of a crash between a deduction and its order")
	flag.Float64Var(&c.pay, "pay", 0.6, "share of orders paid")
	flag.Float64Var(&c.expire, "expire", 0.2, "share of orders expired (then restored)")
	flag.Float64Var(&c.cancel, "cancel", 0.05, "share of orders cancelled (then restored)")
	flag.Parse()
	for _, p := range strings.Split(products, ",") {
		if p = strings.TrimSpace(p); p != "" {
			c.products = append(c.products, p)
		}
	}
	if c.dbURL == "" || c.activity == "" || len(c.products) == 0 || c.buyers < 1 || c.concurrency < 1 {
		fmt.Fprintln(os.Stderr, "order_service: --db, --activity, --products, --buyers >= 1 and --concurrency >= 1 are required")
		os.Exit(2)
	}
	return c
}

func newService(cfg config) (*service, error) {
	read := func(name string) (*redis.Script, error) {
		b, err := os.ReadFile(filepath.Join(cfg.luaDir, name))
		if err != nil {
			return nil, err
		}
		// Five keys: stock, meta, buyers, ledger, events of one {A:P}.
		return redis.NewScript(5, string(b)), nil
	}
	deduct, err := read("deduct.lua")
	if err != nil {
		return nil, err
	}
	restore, err := read("restore.lua")
	if err != nil {
		return nil, err
	}
	pool := &redis.Pool{
		MaxIdle:   cfg.concurrency,
		MaxActive: cfg.concurrency + 1,
		Wait:      true,
		Dial: func() (redis.Conn, error) {
			// A reply slower than 2 s is an unknown outcome like a lost one.
			return redis.Dial("tcp", cfg.redisAddr,
				redis.DialConnectTimeout(2*time.Second), redis.DialReadTimeout(2*time.Second))
		},
	}
	// SCRIPT LOAD once; every call is then EVALSHA, with EVAL when Redis answers NOSCRIPT
	// (a restart or SCRIPT FLUSH): redigo's Script.Do does exactly that.
	conn := pool.Get()
	for _, s := range []*redis.Script{deduct, restore} {
		if err := s.Load(conn); err != nil {
			conn.Close()
			return nil, fmt.Errorf("SCRIPT LOAD: %w", err)
		}
	}
	conn.Close()
	db, err := sql.Open("postgres", cfg.dbURL)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(cfg.concurrency + 1)
	if err := db.Ping(); err != nil {
		return nil, err
	}
	// The run nonce: request ids differ between runs even with the same --seed.
	b := make([]byte, 6)
	if _, err := crand.Read(b); err != nil {
		return nil, err
	}
	return &service{cfg: cfg, pool: pool, db: db, deduct: deduct, restore: restore,
		nonce: hex.EncodeToString(b), stats: stats{replies: map[string]int64{}}}, nil
}

// keys are the five keys of one product, sharing the hash tag {A:P} (one cluster slot).
func (s *service) keys(product string) []interface{} {
	base := fmt.Sprintf("%s:{%s:%s}:", s.cfg.prefix, s.cfg.activity, product)
	return []interface{}{base + "stock", base + "meta", base + "buyers", base + "ledger", base + "events"}
}

// buyer makes the buyer's purchases, then settles each order written: pay, expire, cancel or
// leave it pending.
func (s *service) buyer(rng *rand.Rand, user string) {
	var orders []purchase
	for i := 0; i < s.cfg.purchases; i++ {
		p := s.newPurchase(rng, user)
		if s.buy(rng, p) {
			orders = append(orders, p)
		}
	}
	for _, p := range orders {
		u := rng.Float64()
		switch {
		case u < s.cfg.pay:
			s.pay(p)
		case u < s.cfg.pay+s.cfg.expire:
			s.end(p, "expired")
		case u < s.cfg.pay+s.cfg.expire+s.cfg.cancel:
			s.end(p, "cancelled")
		}
	}
}

func (s *service) newPurchase(rng *rand.Rand, user string) purchase {
	n := atomic.AddInt64(&s.seq, 1)
	// "go-<run nonce>-<counter>": unique across the activity and across runs; 22 bytes, well
	// under the 128 of the request_id column, and the order id "o-<request id>" under its 64.
	rid := fmt.Sprintf("go-%s-%d", s.nonce, n)
	q := 1
	if rng.Float64() < 0.2 {
		q = 2
	}
	atomic.AddInt64(&s.stats.requests, 1)
	return purchase{requestID: rid, orderID: "o-" + rid, user: user, quantity: q,
		product: s.cfg.products[rng.Intn(len(s.cfg.products))]}
}

// buy runs the "Sale" and "Unknown outcome" sequences for one purchase. It reports whether an
// order for it exists afterwards (written now or by an earlier try).
func (s *service) buy(rng *rand.Rand, p purchase) bool {
	reply, known := s.callDeduct(rng, p)
	if !known {
		// "Unknown outcome": FIRST the compensation row (the console's `compensation resolve`
		// decides it if we never learn the outcome), THEN retry the same request id. Half of
		// the buyers give up at once (closed the tab): the row is all that is left. The others
		// retry, bounded, with backoff (10, 20, 40 ms and a little jitter); a retry whose reply
		// is lost again inserts again, which the UNIQUE request_id turns into nothing.
		s.insertCompensation(p, "timeout")
		retry := rng.Float64() >= 0.5
		for attempt := 1; retry && !known && attempt <= maxRetries; attempt++ {
			time.Sleep(time.Duration(10<<uint(attempt-1)+rng.Intn(5)) * time.Millisecond)
			atomic.AddInt64(&s.stats.retries, 1)
			if reply, known = s.callDeduct(rng, p); !known {
				s.insertCompensation(p, "timeout")
			}
		}
		if !known {
			atomic.AddInt64(&s.stats.gaveUp, 1)
			s.stats.reply("unknown")
			return false
		}
	}
	code, sold := outcome(reply)
	s.stats.reply(code)
	switch code {
	case "-4", "error":
		// -4: our arguments are wrong (a bug); an error reply: a corrupt value in Redis.
		// Either way nothing was written: no order.
		atomic.AddInt64(&s.stats.bugs, 1)
		fmt.Fprintf(os.Stderr, "order_service: deduct %s on %s: %v\n", p.requestID, p.product, reply)
	}
	if !sold {
		// -1 "not available now", -2 sold out, -3 over the limit, -5 paused, -8 outside the
		// window: tell the buyer, no order. -7 (returned): the purchase failed, no order; a new
		// purchase would need a new request id.
		return false
	}
	if rng.Float64() < s.cfg.faultCrash {
		// "Crash": the process dies between the deduction and its order. Nothing to do here;
		// the console reports the deduction `orphaned` after its grace window and `fix` returns it.
		atomic.AddInt64(&s.stats.crashes, 1)
		return false
	}
	return s.writeOrder(p)
}

// callDeduct sends deduct.lua once. known is false when the outcome is unknown: a reply lost by
// the injected fault, or a network error or timeout.
func (s *service) callDeduct(rng *rand.Rand, p purchase) (reply interface{}, known bool) {
	args := append(s.keys(p.product), p.requestID, p.user, p.quantity)
	if rng.Float64() < s.cfg.faultTimeout {
		atomic.AddInt64(&s.stats.lost, 1)
		if rng.Intn(3) == 0 {
			// Lost on the way: the request never reached Redis.
			return nil, false
		}
		// Lost on the way back: sent on its own connection, which is closed unread, as when an
		// app server's connection drops after sending. Redis runs the script all the same.
		c, err := redis.Dial("tcp", s.cfg.redisAddr, redis.DialConnectTimeout(2*time.Second))
		if err == nil {
			if s.deduct.SendHash(c, args...) == nil {
				c.Flush()
			}
			c.Close()
		}
		return nil, false
	}
	conn := s.pool.Get()
	defer conn.Close()
	reply, err := s.deduct.Do(conn, args...) // EVALSHA, then EVAL on NOSCRIPT
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return rerr, true // an error reply ("ERR seckill: ..."): known, nothing was written
	}
	if err != nil {
		return nil, false // timeout or dropped connection: the script may or may not have run
	}
	return reply, true
}

// outcome maps a deduct.lua reply to its code and whether it sold.
func outcome(reply interface{}) (string, bool) {
	n, ok := reply.(int64)
	switch {
	case !ok:
		return "error", false
	case n >= 0:
		return "sold", true
	default:
		return fmt.Sprint(n), false
	}
}

// insertCompensation writes the compensation row of an unknown outcome: status pending, the
// purchase's product, user and quantity. A second timeout of the same request id writes no
// second row (request_id is UNIQUE: insert-or-ignore).
func (s *service) insertCompensation(p purchase, reason string) {
	res, err := s.db.Exec(`INSERT INTO seckill_compensation
		(request_id, activity_id, product_id, user_id, quantity, status, reason, created_at)
		VALUES ($1, $2, $3, $4, $5, 'pending', $6, now())
		ON CONFLICT (request_id) DO NOTHING`,
		p.requestID, s.cfg.activity, p.product, p.user, p.quantity, reason)
	if err != nil {
		s.dbBug("compensation", p, err)
		return
	}
	if n, _ := res.RowsAffected(); n == 1 {
		atomic.AddInt64(&s.stats.compRows, 1)
	}
}

// writeOrder is the order half of "Sale": the order (pending_payment, copying the deduction's
// activity, product, user and quantity; created_at = updated_at = now) and its outbox row, in
// ONE transaction. It reports whether the order exists afterwards.
func (s *service) writeOrder(p purchase) bool {
	tx, err := s.db.Begin()
	if err != nil {
		// No transaction began: the order surely does not exist ("Order insert failed").
		return s.orderFailed(p, err)
	}
	_, err = tx.Exec(`INSERT INTO seckill_order
		(order_id, request_id, activity_id, product_id, user_id, quantity, status, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, 'pending_payment', now(), now())`,
		p.orderID, p.requestID, s.cfg.activity, p.product, p.user, p.quantity)
	if err == nil {
		_, err = tx.Exec(`INSERT INTO seckill_outbox
			(order_id, activity_id, topic, payload, status, attempts, created_at)
			VALUES ($1, $2, 'seckill.order.created', $3, 'pending', 0, now())`,
			p.orderID, s.cfg.activity, s.payload(p))
	}
	if err != nil {
		tx.Rollback()
		var pqErr *pq.Error
		if errors.As(err, &pqErr) && pqErr.Code == "23505" && pqErr.Table == "seckill_order" {
			// UNIQUE violation on request_id (or its order id): an earlier try of this request
			// already wrote the order and its outbox row. Fine.
			atomic.AddInt64(&s.stats.already, 1)
			return true
		}
		// Rolled back before any commit: the order surely does not exist.
		return s.orderFailed(p, err)
	}
	if err := tx.Commit(); err != nil {
		var pqErr *pq.Error
		if errors.As(err, &pqErr) {
			// The server refused the commit: rolled back, the order surely does not exist.
			return s.orderFailed(p, err)
		}
		// The commit's outcome is unknown (connection lost): do NOTHING. Restoring now could
		// return units a live order holds; the console finds an orphan after the grace window
		// and `fix` returns it.
		atomic.AddInt64(&s.stats.commitLost, 1)
		fmt.Fprintf(os.Stderr, "order_service: commit of %s unknown: %v\n", p.requestID, err)
		return false
	}
	atomic.AddInt64(&s.stats.written, 1)
	return true
}

// orderFailed is "Order insert failed": the transaction surely rolled back, so the deduction
// has no order and never will: give its units back now (restore.lua), never when the order
// may exist.
func (s *service) orderFailed(p purchase, err error) bool {
	atomic.AddInt64(&s.stats.insertFail, 1)
	fmt.Fprintf(os.Stderr, "order_service: order %s not written (%v): restoring\n", p.requestID, err)
	s.callRestore(p)
	return false
}

// payload is the outbox message: the order's values, keys in this order, compact, as the
// console writes it (no HTML escaping, no trailing newline).
func (s *service) payload(p purchase) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(struct {
		ActivityID string `json:"activity_id"`
		OrderID    string `json:"order_id"`
		ProductID  string `json:"product_id"`
		Quantity   int    `json:"quantity"`
		RequestID  string `json:"request_id"`
		UserID     string `json:"user_id"`
	}{s.cfg.activity, p.orderID, p.product, p.quantity, p.requestID, p.user})
	return strings.TrimSuffix(buf.String(), "\n")
}

// pay is "Payment": pending_payment -> paid, updated_at moves (strictly later than created_at).
func (s *service) pay(p purchase) {
	res, err := s.db.Exec(`UPDATE seckill_order SET status = 'paid', updated_at = now()
		WHERE request_id = $1 AND status = 'pending_payment'`, p.requestID)
	if err != nil {
		s.dbBug("pay", p, err)
		return
	}
	if n, _ := res.RowsAffected(); n == 1 {
		atomic.AddInt64(&s.stats.paid, 1)
	}
}

// end is "Expiry / cancellation": mark the order dead FIRST (its own committed statement), and
// ONLY when that changed a row, AFTER the commit, give the units back with restore.lua.
// Restoring first would leave a live order without its deduction in between: the console
// raises a critical drift (order_after_return).
func (s *service) end(p purchase, status string) {
	res, err := s.db.Exec(`UPDATE seckill_order SET status = $2, updated_at = now()
		WHERE request_id = $1 AND status = 'pending_payment'`, p.requestID, status)
	if err != nil {
		s.dbBug(status, p, err)
		return
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return // someone else moved it (paid, or ended by another worker): restore nothing
	}
	if status == "expired" {
		atomic.AddInt64(&s.stats.expired, 1)
	} else {
		atomic.AddInt64(&s.stats.cancelled, 1)
	}
	s.callRestore(p)
}

// callRestore runs restore.lua for the purchase's request id. > 0: units returned; 0: already
// returned (idempotent); -1: a piece of the product is missing (the console's fix rebuilds it
// and returns the deduction); -6: nothing was deducted for it.
func (s *service) callRestore(p purchase) {
	conn := s.pool.Get()
	defer conn.Close()
	n, err := redis.Int64(s.restore.Do(conn, append(s.keys(p.product), p.requestID)...))
	switch {
	case err != nil:
		// Unknown or refused: nothing to redo here, the console returns what a dead order holds.
		atomic.AddInt64(&s.stats.restoreOdd, 1)
		fmt.Fprintf(os.Stderr, "order_service: restore %s: %v\n", p.requestID, err)
	case n > 0:
		atomic.AddInt64(&s.stats.restored, n)
	default:
		atomic.AddInt64(&s.stats.restoreOdd, 1)
		if n == -4 {
			atomic.AddInt64(&s.stats.bugs, 1)
		}
		fmt.Fprintf(os.Stderr, "order_service: restore %s answered %d\n", p.requestID, n)
	}
}

func (s *service) dbBug(what string, p purchase, err error) {
	atomic.AddInt64(&s.stats.bugs, 1)
	fmt.Fprintf(os.Stderr, "order_service: %s %s: %v\n", what, p.requestID, err)
}

// printSummary prints one JSON line (struct fields keep their order).
func (s *service) printSummary() {
	st := &s.stats
	out, _ := json.Marshal(struct {
		Client        string           `json:"client"`
		Activity      string           `json:"activity"`
		Run           string           `json:"run"`
		Requests      int64            `json:"requests"`
		Replies       map[string]int64 `json:"replies"`
		LostReplies   int64            `json:"lost_replies"`
		Retries       int64            `json:"retries"`
		GaveUp        int64            `json:"gave_up"`
		Compensation  int64            `json:"compensation_rows"`
		Crashes       int64            `json:"crashes"`
		Written       int64            `json:"orders_written"`
		Already       int64            `json:"orders_already_written"`
		InsertFailed  int64            `json:"order_insert_failed"`
		CommitUnknown int64            `json:"commit_unknown"`
		Paid          int64            `json:"paid"`
		Expired       int64            `json:"expired"`
		Cancelled     int64            `json:"cancelled"`
		Restored      int64            `json:"restored_units"`
		RestoreOther  int64            `json:"restore_other_replies"`
		Bugs          int64            `json:"bugs"`
	}{"go", s.cfg.activity, s.nonce, st.requests, st.replies, st.lost, st.retries, st.gaveUp,
		st.compRows, st.crashes, st.written, st.already, st.insertFail, st.commitLost,
		st.paid, st.expired, st.cancelled, st.restored, st.restoreOdd, st.bugs})
	fmt.Println(string(out))
}
