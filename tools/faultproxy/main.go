// faultproxy stands between a client (chamberd) and the test control plane's kube-apiserver and
// injects faults on command: added latency, a share of requests answered 500, 503 or 429, every
// open watch cut, watches answered 410 Gone, and outages in which every connection is dropped.
//
// It terminates TLS with the apiserver's own certificate (which covers 127.0.0.1) and forwards to
// the apiserver with the admin client certificate, streaming responses as they arrive, so a
// client of the proxy sees the apiserver as it is plus the faults switched on.
//
// Usage:
//
//	faultproxy --pki <controlplane>/pki --upstream https://127.0.0.1:<port> \
//	    --kubeconfig-out proxy.kubeconfig --addr-file proxy.addr
//
// The control endpoint (HTTP, loopback only; its address is the second line of --addr-file):
//
//	POST /latency?ms=N                 delay every request N ms before forwarding (0: off)
//	POST /errors?share=F&codes=500,503,429   answer a share F of requests with one of the codes
//	POST /fail?suffix=S&code=C&count=N[&skip=K][&after=1]
//	                                   let K requests whose path ends with S (or with any of the
//	                                   comma-separated suffixes S) through, then answer the next
//	                                   N with code C; with after=1 forward them first (the
//	                                   apiserver acts, the answer is lost)
//	POST /hold?suffix=S&count=N        hold the next N requests whose path ends with S (or any of
//	                                   the comma-separated suffixes S) until /release, then
//	                                   forward them, even if their client is gone or stopped (a
//	                                   request in flight, delivered late)
//	POST /release                      forward the held requests now
//	GET  /held                         the held requests so far and, once forwarded, the answers
//	                                   they got: JSON [{path, held, code, body}]
//	POST /cut                          cut every open watch stream now
//	POST /gone?seconds=N               for N s, cut open watches with a 410 Gone event and answer
//	                                   new watches with one
//	POST /outage?seconds=N             for N s, drop every connection (as a restarting apiserver)
//	POST /reset                        every fault off
//	GET  /stats                        counters, JSON
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// faults is what the control endpoint switched on.
type faults struct {
	mu          sync.Mutex
	latency     time.Duration
	errorShare  float64
	errorCodes  []int
	goneUntil   time.Time
	outageUntil time.Time
	failSuffix  []string
	failCode    int
	failLeft    int
	failSkip    int
	failAfter   bool
	holdSuffix  []string
	holdLeft    int
	release     chan struct{} // closed by /release
	held        []*heldRequest
}

// heldRequest is a request /hold kept back, and the answer it got once forwarded.
type heldRequest struct {
	Path string `json:"path"`
	Held bool   `json:"held"` // not forwarded yet
	Code int    `json:"code"`
	Body string `json:"body"` // its start
}

// recorder passes a response on and keeps its code and the start of its body.
type recorder struct {
	http.ResponseWriter
	code int
	body []byte
}

func (r *recorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	if room := 2048 - len(r.body); room > 0 {
		r.body = append(r.body, b[:min(room, len(b))]...)
	}
	return r.ResponseWriter.Write(b)
}

// discard is a ResponseWriter that drops what it is given: a forwarded request's lost answer.
type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

type stats struct {
	Requests    atomic.Int64
	Watches     atomic.Int64
	Errors      atomic.Int64
	Delayed     atomic.Int64
	Cut         atomic.Int64
	Gone        atomic.Int64
	Dropped     atomic.Int64
	OpenWatches atomic.Int64
}

type proxy struct {
	upstream *httputil.ReverseProxy
	faults   faults
	stats    stats
	rng      *rand.Rand
	rngMu    sync.Mutex

	mu      sync.Mutex
	watches map[uint64]*watch
	nextID  uint64
	conns   *trackingListener
}

// watch is an open watch stream: cancel cuts it; gone first sends a 410 event.
type watch struct {
	cancel context.CancelFunc
	gone   chan struct{}
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

func (p *proxy) float() float64 {
	p.rngMu.Lock()
	defer p.rngMu.Unlock()
	return p.rng.Float64()
}

func (p *proxy) pick(n int) int {
	p.rngMu.Lock()
	defer p.rngMu.Unlock()
	return p.rng.IntN(n)
}

// status writes a Kubernetes Status object.
func status(w http.ResponseWriter, code int, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": message, "reason": reason, "code": code,
	})
}

// goneEvent is what kube-apiserver sends on a watch whose resourceVersion is too old.
func goneEvent() []byte {
	b, _ := json.Marshal(map[string]any{
		"type": "ERROR",
		"object": map[string]any{
			"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
			"status": "Failure", "message": "too old resource version (injected by faultproxy)",
			"reason": "Expired", "code": 410,
		},
	})
	return append(b, '\n')
}

// hasAnySuffix says whether path ends with one of suffixes.
func hasAnySuffix(path string, suffixes []string) bool {
	for _, s := range suffixes {
		if strings.HasSuffix(path, s) {
			return true
		}
	}
	return false
}

var reasons = map[int]string{500: "InternalError", 503: "ServiceUnavailable", 429: "TooManyRequests"}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.stats.Requests.Add(1)
	p.faults.mu.Lock()
	latency, share, codes := p.faults.latency, p.faults.errorShare, p.faults.errorCodes
	gone := time.Now().Before(p.faults.goneUntil)
	var hold *heldRequest
	var release chan struct{}
	if p.faults.holdLeft > 0 && hasAnySuffix(r.URL.Path, p.faults.holdSuffix) {
		p.faults.holdLeft--
		hold = &heldRequest{Path: r.URL.Path, Held: true}
		p.faults.held = append(p.faults.held, hold)
		release = p.faults.release
	}
	failCode, failAfter := 0, false
	if p.faults.failLeft > 0 && hasAnySuffix(r.URL.Path, p.faults.failSuffix) {
		if p.faults.failSkip > 0 {
			p.faults.failSkip--
		} else {
			p.faults.failLeft--
			failCode, failAfter = p.faults.failCode, p.faults.failAfter
		}
	}
	p.faults.mu.Unlock()

	if hold != nil {
		<-release
		// Delivered whatever became of its client: it was on its way.
		rec := &recorder{ResponseWriter: w}
		p.upstream.ServeHTTP(rec, r.WithContext(context.WithoutCancel(r.Context())))
		p.faults.mu.Lock()
		hold.Held, hold.Code, hold.Body = false, rec.code, string(rec.body)
		p.faults.mu.Unlock()
		return
	}

	if failCode != 0 {
		p.stats.Errors.Add(1)
		if failAfter {
			p.upstream.ServeHTTP(&discard{header: http.Header{}}, r)
		}
		status(w, failCode, reasons[failCode], "injected by faultproxy")
		return
	}

	if latency > 0 {
		p.stats.Delayed.Add(1)
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
	}
	if share > 0 && len(codes) > 0 && p.float() < share {
		p.stats.Errors.Add(1)
		code := codes[p.pick(len(codes))]
		status(w, code, reasons[code], "injected by faultproxy")
		return
	}
	if !isWatch(r) {
		p.upstream.ServeHTTP(w, r)
		return
	}
	p.stats.Watches.Add(1)
	if gone {
		p.stats.Gone.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(goneEvent())
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	wt := &watch{cancel: cancel, gone: make(chan struct{})}
	p.mu.Lock()
	p.nextID++
	id := p.nextID
	p.watches[id] = wt
	p.mu.Unlock()
	p.stats.OpenWatches.Add(1)
	defer func() {
		p.mu.Lock()
		delete(p.watches, id)
		p.mu.Unlock()
		p.stats.OpenWatches.Add(-1)
	}()
	p.upstream.ServeHTTP(&goneWriter{ResponseWriter: w, gone: wt.gone}, r.WithContext(ctx))
}

// goneWriter passes a watch stream through and, once `gone` closes, writes a 410 event instead
// of anything more (the stream is cancelled right after). The event goes out only between two
// events, as the apiserver sends it; in the middle of one the stream is just cut.
type goneWriter struct {
	http.ResponseWriter
	gone    chan struct{}
	mu      sync.Mutex
	sent    bool
	midLine bool // the last byte passed on did not end an event
}

func (g *goneWriter) Write(b []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.gone:
		if !g.sent && !g.midLine {
			g.sent = true
			_, _ = g.ResponseWriter.Write(goneEvent())
			g.Flush()
		}
		return 0, errors.New("watch ended by an injected 410")
	default:
	}
	n, err := g.ResponseWriter.Write(b)
	if n > 0 {
		g.midLine = b[n-1] != '\n'
	}
	return n, err
}

func (g *goneWriter) Flush() {
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// cutWatches ends every open watch; with gone, each first gets a 410 event.
func (p *proxy) cutWatches(gone bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, wt := range p.watches {
		if gone {
			close(wt.gone)
			// The event goes out with the next write; a quiet stream is cut after a moment.
			go func(c context.CancelFunc) {
				time.Sleep(200 * time.Millisecond)
				c()
			}(wt.cancel)
		} else {
			wt.cancel()
		}
	}
	n := len(p.watches)
	p.watches = map[uint64]*watch{}
	return n
}

// trackingListener knows every open connection, so an outage can drop them all, and drops new
// ones while the outage lasts.
type trackingListener struct {
	net.Listener
	p     *proxy
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (l *trackingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.p.faults.mu.Lock()
		down := time.Now().Before(l.p.faults.outageUntil)
		l.p.faults.mu.Unlock()
		if down {
			l.p.stats.Dropped.Add(1)
			_ = c.Close()
			continue
		}
		tc := &trackedConn{Conn: c, l: l}
		l.mu.Lock()
		l.conns[tc] = struct{}{}
		l.mu.Unlock()
		return tc, nil
	}
}

func (l *trackingListener) dropAll() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.conns)
	for c := range l.conns {
		_ = c.(*trackedConn).Conn.Close()
	}
	l.conns = map[net.Conn]struct{}{}
	return n
}

type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// countAndSuffixes reads the parameters count (a number of requests) and suffix (the ends of the
// paths to `verb`, comma-separated) of /fail and /hold.
func countAndSuffixes(q url.Values, verb string) (int, []string, error) {
	count, err := strconv.Atoi(q.Get("count"))
	if err != nil || count < 0 {
		return 0, nil, errors.New("parameter count: want a number of requests not below 0")
	}
	suffixes := strings.Split(q.Get("suffix"), ",")
	for _, s := range suffixes {
		if s == "" {
			return 0, nil, fmt.Errorf("parameter suffix: %q: want the ends of the paths to %s, "+
				"comma-separated, none empty, e.g. /binding", q.Get("suffix"), verb)
		}
	}
	return count, suffixes, nil
}

// release lets every held request go on; the next ones /hold catches wait for the next call.
func (p *proxy) release() int {
	p.faults.mu.Lock()
	defer p.faults.mu.Unlock()
	n := 0
	for _, h := range p.faults.held {
		if h.Held {
			n++
		}
	}
	close(p.faults.release)
	p.faults.release = make(chan struct{})
	return n
}

func seconds(r *http.Request, name string) (time.Duration, error) {
	v, err := strconv.ParseFloat(r.URL.Query().Get(name), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("parameter %s: want a number of seconds not below 0", name)
	}
	return time.Duration(v * float64(time.Second)), nil
}

func (p *proxy) control() http.Handler {
	mux := http.NewServeMux()
	fail := func(w http.ResponseWriter, err error) { http.Error(w, err.Error(), http.StatusBadRequest) }
	mux.HandleFunc("POST /latency", func(w http.ResponseWriter, r *http.Request) {
		ms, err := strconv.Atoi(r.URL.Query().Get("ms"))
		if err != nil || ms < 0 {
			fail(w, errors.New("parameter ms: want milliseconds not below 0"))
			return
		}
		p.faults.mu.Lock()
		p.faults.latency = time.Duration(ms) * time.Millisecond
		p.faults.mu.Unlock()
		fmt.Fprintf(w, "latency %d ms\n", ms)
	})
	mux.HandleFunc("POST /errors", func(w http.ResponseWriter, r *http.Request) {
		share, err := strconv.ParseFloat(r.URL.Query().Get("share"), 64)
		if err != nil || share < 0 || share > 1 {
			fail(w, errors.New("parameter share: want a number from 0 to 1"))
			return
		}
		codes := []int{}
		for _, s := range strings.Split(r.URL.Query().Get("codes"), ",") {
			if s == "" {
				continue
			}
			c, err := strconv.Atoi(s)
			if err != nil || reasons[c] == "" {
				fail(w, fmt.Errorf("parameter codes: %q is not one of 500, 503, 429", s))
				return
			}
			codes = append(codes, c)
		}
		if len(codes) == 0 {
			codes = []int{500, 503, 429}
		}
		p.faults.mu.Lock()
		p.faults.errorShare, p.faults.errorCodes = share, codes
		p.faults.mu.Unlock()
		fmt.Fprintf(w, "errors %.2f %v\n", share, codes)
	})
	mux.HandleFunc("POST /fail", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		code, err := strconv.Atoi(q.Get("code"))
		if err != nil || reasons[code] == "" {
			fail(w, fmt.Errorf("parameter code: %q is not one of 500, 503, 429", q.Get("code")))
			return
		}
		count, suffixes, err := countAndSuffixes(q, "fail")
		if err != nil {
			fail(w, err)
			return
		}
		skip := 0
		if q.Get("skip") != "" {
			if skip, err = strconv.Atoi(q.Get("skip")); err != nil || skip < 0 {
				fail(w, errors.New("parameter skip: want a number of requests not below 0"))
				return
			}
		}
		p.faults.mu.Lock()
		p.faults.failSuffix, p.faults.failCode, p.faults.failLeft = suffixes, code, count
		p.faults.failSkip = skip
		p.faults.failAfter = q.Get("after") == "1"
		p.faults.mu.Unlock()
		fmt.Fprintf(w, "fail %d requests ending %s with %d\n", count, q.Get("suffix"), code)
	})
	mux.HandleFunc("POST /hold", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		count, suffixes, err := countAndSuffixes(q, "hold")
		if err != nil {
			fail(w, err)
			return
		}
		p.faults.mu.Lock()
		p.faults.holdSuffix, p.faults.holdLeft = suffixes, count
		p.faults.mu.Unlock()
		fmt.Fprintf(w, "hold %d requests ending %s\n", count, q.Get("suffix"))
	})
	mux.HandleFunc("POST /release", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "released %d requests\n", p.release())
	})
	mux.HandleFunc("GET /held", func(w http.ResponseWriter, r *http.Request) {
		p.faults.mu.Lock()
		defer p.faults.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.faults.held)
	})
	mux.HandleFunc("POST /cut", func(w http.ResponseWriter, r *http.Request) {
		n := p.cutWatches(false)
		p.stats.Cut.Add(int64(n))
		fmt.Fprintf(w, "cut %d watches\n", n)
	})
	mux.HandleFunc("POST /gone", func(w http.ResponseWriter, r *http.Request) {
		d, err := seconds(r, "seconds")
		if err != nil {
			fail(w, err)
			return
		}
		p.faults.mu.Lock()
		p.faults.goneUntil = time.Now().Add(d)
		p.faults.mu.Unlock()
		n := p.cutWatches(true)
		p.stats.Gone.Add(int64(n))
		fmt.Fprintf(w, "410 Gone for %v; %d watches ended\n", d, n)
	})
	mux.HandleFunc("POST /outage", func(w http.ResponseWriter, r *http.Request) {
		d, err := seconds(r, "seconds")
		if err != nil {
			fail(w, err)
			return
		}
		p.faults.mu.Lock()
		p.faults.outageUntil = time.Now().Add(d)
		p.faults.mu.Unlock()
		p.cutWatches(false)
		n := p.conns.dropAll()
		p.stats.Dropped.Add(int64(n))
		fmt.Fprintf(w, "outage for %v; %d connections dropped\n", d, n)
	})
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, r *http.Request) {
		p.faults.mu.Lock()
		p.faults.latency, p.faults.errorShare = 0, 0
		p.faults.goneUntil, p.faults.outageUntil = time.Time{}, time.Time{}
		p.faults.failLeft, p.faults.holdLeft = 0, 0
		p.faults.mu.Unlock()
		p.release()
		fmt.Fprintln(w, "every fault off")
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int64{
			"requests": p.stats.Requests.Load(), "watches": p.stats.Watches.Load(),
			"errors": p.stats.Errors.Load(), "delayed": p.stats.Delayed.Load(),
			"cut": p.stats.Cut.Load(), "gone": p.stats.Gone.Load(),
			"dropped": p.stats.Dropped.Load(), "open_watches": p.stats.OpenWatches.Load(),
		})
	})
	return mux
}

// writeKubeconfig writes a kubeconfig for the proxy: the control plane's CA and admin user.
func writeKubeconfig(file, server, pki string) error {
	data := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(pki, name))
		return base64.StdEncoding.EncodeToString(b), err
	}
	ca, err := data("ca.crt")
	if err != nil {
		return err
	}
	crt, err := data("admin.crt")
	if err != nil {
		return err
	}
	key, err := data("admin.key")
	if err != nil {
		return err
	}
	text := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: faultproxy
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: faultproxy
  context:
    cluster: faultproxy
    user: admin
current-context: faultproxy
`, server, ca, crt, key)
	return os.WriteFile(file, []byte(text), 0o600)
}

func run() error {
	pki := flag.String("pki", "", "the control plane's pki directory (ca.crt, apiserver.*, admin.*)")
	upstream := flag.String("upstream", "", "the apiserver's URL, https://127.0.0.1:<port>")
	listen := flag.String("listen", "127.0.0.1:0", "where the proxy serves")
	controlAddr := flag.String("control", "127.0.0.1:0", "where the control endpoint serves")
	kubeconfig := flag.String("kubeconfig-out", "", "write a kubeconfig for the proxy here")
	addrFile := flag.String("addr-file", "", "write the proxy's and the control endpoint's addresses here, a line each, once serving")
	seed := flag.Uint64("seed", 1, "seed of the choice of requests answered with errors")
	flag.Parse()
	if *pki == "" || *upstream == "" {
		return errors.New("--pki and --upstream are required")
	}
	target, err := url.Parse(*upstream)
	if err != nil {
		return fmt.Errorf("--upstream: %w", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(*pki, "ca.crt"))
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("%s: no certificate", filepath.Join(*pki, "ca.crt"))
	}
	client, err := tls.LoadX509KeyPair(filepath.Join(*pki, "admin.crt"), filepath.Join(*pki, "admin.key"))
	if err != nil {
		return err
	}
	server, err := tls.LoadX509KeyPair(filepath.Join(*pki, "apiserver.crt"), filepath.Join(*pki, "apiserver.key"))
	if err != nil {
		return err
	}

	p := &proxy{rng: rand.New(rand.NewPCG(*seed, *seed^0x9e3779b97f4a7c15)), watches: map[uint64]*watch{}}
	p.faults.release = make(chan struct{})
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.Transport = &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{client}},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	rp.ErrorLog = log.New(os.Stderr, "faultproxy: upstream: ", log.LstdFlags)
	p.upstream = rp

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	p.conns = &trackingListener{Listener: ln, p: p, conns: map[net.Conn]struct{}{}}
	cln, err := net.Listen("tcp", *controlAddr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:   p,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{server}, NextProtos: []string{"h2", "http/1.1"}},
		ErrorLog:  log.New(os.Stderr, "faultproxy: ", log.LstdFlags),
	}
	errs := make(chan error, 2)
	go func() { errs <- srv.ServeTLS(p.conns, "", "") }()
	go func() { errs <- http.Serve(cln, p.control()) }()

	addr := "https://" + ln.Addr().String()
	if *kubeconfig != "" {
		if err := writeKubeconfig(*kubeconfig, addr, *pki); err != nil {
			return err
		}
	}
	if *addrFile != "" {
		text := ln.Addr().String() + "\n" + cln.Addr().String() + "\n"
		tmp := *addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, *addrFile); err != nil {
			return err
		}
	}
	log.Printf("faultproxy: serving %s for %s, control on http://%s", addr, target, cln.Addr())
	return <-errs
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "faultproxy:", err)
		os.Exit(1)
	}
}
