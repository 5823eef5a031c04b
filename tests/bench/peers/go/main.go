// SPDX-License-Identifier: MIT
//
// fiberd-bench-go — the Go peers of fiberd's benchmarks (tests/bench/bench.c runs them,
// interleaved with its own figures, and prints one table).
//
// Each subcommand measures one figure in this process and prints one line on stdout:
// a number, or two for lateness. The shapes mirror the C side figure by figure:
//
//	yield N         2 goroutines, GOMAXPROCS=1, each calls runtime.Gosched() N times:
//	                ns per switch (elapsed / 2N)
//	create N        N goroutines started from main with a sync.WaitGroup, then Wait:
//	                ns per goroutine
//	skynet          the classic skynet (github.com/atemerev/skynet): a 10-ary tree of
//	                goroutines, 1,000,000 leaves, results over unbuffered channels; the sum
//	                must be 499999500000: ms for the whole tree
//	pingpong N      2 goroutines, GOMAXPROCS=2, unbuffered channels, N round trips:
//	                ns per round trip
//	pingpong-buffered N  the same over channels of capacity 1
//	fanout N        N goroutines started from main, each writing its index into a
//	                slice, a sync.WaitGroup, then the sum (checked): ns per goroutine
//	sleepers N      N goroutines blocked in time.Sleep at once: resident bytes per
//	                goroutine, (RSS with them - RSS before) / N from /proc/self/statm
//	lateness G K    G goroutines each sleeping 1 ms K times: lateness (wake - deadline)
//	                p50 and p99 in µs
//	block, http     the hooks rows' peers: see blocking.go
//	version         the Go release the peers were built with, for the table's header
//
// Errors go to stderr with exit status 1, so the driver reports a failed row instead of
// a number. No dependencies beyond the standard library: `go build` works off-line.
package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "fiberd-bench-go: "+format+"\n", args...)
	os.Exit(1)
}

// arg returns os.Args[i] as a positive integer, or def when it is absent.
func arg(i int, def int) int {
	if len(os.Args) <= i {
		return def
	}
	v, err := strconv.Atoi(os.Args[i])
	if err != nil || v <= 0 {
		fail("bad count %q", os.Args[i])
	}
	return v
}

func benchYield(n int) {
	runtime.GOMAXPROCS(1)
	var wg sync.WaitGroup
	wg.Add(2)
	start := time.Now()
	for g := 0; g < 2; g++ {
		go func() {
			for i := 0; i < n; i++ {
				runtime.Gosched()
			}
			wg.Done()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	fmt.Printf("%.2f\n", float64(el.Nanoseconds())/float64(2*n))
}

func benchCreate(n int) {
	var wg sync.WaitGroup
	var sum int64
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			atomic.AddInt64(&sum, 1)
			wg.Done()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if sum != int64(n) {
		fail("create: %d goroutines ran, want %d", sum, n)
	}
	fmt.Printf("%.2f\n", float64(el.Nanoseconds())/float64(n))
}

func benchFanOut(n int) {
	vals := make([]int64, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			vals[i] = int64(i)
			wg.Done()
		}(i)
	}
	wg.Wait()
	var sum int64
	for _, v := range vals {
		sum += v
	}
	el := time.Since(start)
	if want := int64(n) * int64(n-1) / 2; sum != want {
		fail("fanout: sum %d, want %d", sum, want)
	}
	fmt.Printf("%.2f\n", float64(el.Nanoseconds())/float64(n))
}

func skynet(c chan int, num int, size int, div int) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int)
	sum := 0
	for i := 0; i < div; i++ {
		subNum := num + i*(size/div)
		go skynet(rc, subNum, size/div, div)
	}
	for i := 0; i < div; i++ {
		sum += <-rc
	}
	c <- sum
}

func benchSkynet() {
	c := make(chan int)
	start := time.Now()
	go skynet(c, 0, 1000000, 10)
	sum := <-c
	el := time.Since(start)
	if sum != 499999500000 {
		fail("skynet: sum %d, want 499999500000", sum)
	}
	fmt.Printf("%.2f\n", float64(el.Nanoseconds())/1e6)
}

func benchPingPong(n int) {
	benchPingPongCap(n, 0)
}

func benchPingPongCap(n int, capacity int) {
	runtime.GOMAXPROCS(2)
	ping := make(chan int, capacity)
	pong := make(chan int, capacity)
	done := make(chan bool)
	go func() {
		for i := 0; i < n; i++ {
			v := <-ping
			pong <- v + 1
		}
		done <- true
	}()
	start := time.Now()
	for i := 0; i < n; i++ {
		ping <- i
		if v := <-pong; v != i+1 {
			fail("pingpong: got %d, want %d", v, i+1)
		}
	}
	el := time.Since(start)
	<-done
	fmt.Printf("%.2f\n", float64(el.Nanoseconds())/float64(n))
}

// rssBytes reads the resident set size from /proc/self/statm (second field, in pages).
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		fail("statm: %v", err)
	}
	var size, resident int64
	if _, err := fmt.Sscan(string(b), &size, &resident); err != nil {
		fail("statm: %v", err)
	}
	return resident * int64(os.Getpagesize())
}

func benchSleepers(n int) {
	var asleep int64
	var stop int32
	var wg sync.WaitGroup
	runtime.GC()
	before := rssBytes()
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			atomic.AddInt64(&asleep, 1)
			for atomic.LoadInt32(&stop) == 0 {
				time.Sleep(3 * time.Second)
			}
			wg.Done()
		}()
	}
	for atomic.LoadInt64(&asleep) < int64(n) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // let the last ones reach time.Sleep
	after := rssBytes()
	atomic.StoreInt32(&stop, 1)
	wg.Wait()
	fmt.Printf("%.1f\n", float64(after-before)/float64(n))
}

func benchLateness(g, k int) {
	samples := make([]int64, g*k)
	var wg sync.WaitGroup
	wg.Add(g)
	for j := 0; j < g; j++ {
		go func(mine []int64) {
			for i := range mine {
				deadline := time.Now().Add(time.Millisecond)
				time.Sleep(time.Millisecond)
				mine[i] = int64(time.Since(deadline))
			}
			wg.Done()
		}(samples[j*k : (j+1)*k])
	}
	wg.Wait()
	sort.Slice(samples, func(a, b int) bool { return samples[a] < samples[b] })
	p50 := samples[len(samples)*50/100]
	p99 := samples[len(samples)*99/100]
	fmt.Printf("%.1f %.1f\n", float64(p50)/1e3, float64(p99)/1e3)
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: fiberd-bench-go yield|create|skynet|pingpong|sleepers|lateness [counts]")
	}
	switch os.Args[1] {
	case "version":
		fmt.Println(runtime.Version())
	case "yield":
		benchYield(arg(2, 1000000))
	case "create":
		benchCreate(arg(2, 1000000))
	case "skynet":
		benchSkynet()
	case "pingpong":
		benchPingPong(arg(2, 200000))
	case "pingpong-buffered":
		benchPingPongCap(arg(2, 200000), 1)
	case "fanout":
		benchFanOut(arg(2, 10000))
	case "sleepers":
		benchSleepers(arg(2, 1000000))
	case "lateness":
		benchLateness(arg(2, 100), arg(3, 200))
	case "block":
		if len(os.Args) < 4 {
			fail("usage: block nanosleep|poll|read N [PATH]")
		}
		path := ""
		if len(os.Args) > 4 {
			path = os.Args[4]
		}
		benchBlock(os.Args[2], arg(3, 200), path)
	case "http":
		if len(os.Args) < 4 {
			fail("usage: http N URL")
		}
		benchHTTP(arg(2, 2000), os.Args[3])
	default:
		fail("unknown figure %q", os.Args[1])
	}
}
