// SPDX-License-Identifier: MIT
//
// blocking.go — the Go peers of the hooks rows (tests/bench/bench-hooks.c): goroutines
// that make raw blocking system calls, and net/http against a slow server. The C side
// (`fiberd-bench hooks-go`) runs the slow server, starts this binary with GOMAXPROCS=2,
// and samples its thread count; this side prints the elapsed ms.
//
//	block nanosleep N     N goroutines, each syscall.Nanosleep(100 ms)
//	block poll N          N goroutines, each the poll(2) syscall (NULL, 0, 100)
//	block read N PATH     N goroutines, each a blocking Unix socket (syscall.Socket,
//	                      Connect), then syscall.Read of the byte the server at PATH
//	                      sends 100 ms after the accept
//	http N URL            N goroutines, each an http.Get of URL (keep-alives off, as
//	                      the server closes), the body read and checked
//
// The raw calls are what a cgo-free Go program's blocking syscalls are: the goroutine's
// thread blocks in the kernel, and the runtime hands its P to another thread (sysmon
// after 20 µs), so N calls at once need about N threads. The limit on threads is
// raised from 10,000 so that the 10,000-call figure measures instead of aborting.
package main

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const blockMs = 100

func blockOnce(call, path string) error {
	switch call {
	case "nanosleep":
		ts := syscall.NsecToTimespec(blockMs * int64(time.Millisecond))
		for {
			var rem syscall.Timespec
			err := syscall.Nanosleep(&ts, &rem)
			if err != syscall.EINTR {
				return err
			}
			ts = rem
		}
	case "poll":
		deadline := time.Now().Add(blockMs * time.Millisecond)
		for {
			ms := time.Until(deadline).Milliseconds()
			if ms <= 0 {
				return nil
			}
			_, _, e := syscall.Syscall(syscall.SYS_POLL, 0, 0, uintptr(ms))
			if e != 0 && e != syscall.EINTR {
				return e
			}
		}
	case "read":
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer syscall.Close(fd)
		if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
			return err
		}
		var b [1]byte
		for {
			n, err := syscall.Read(fd, b[:])
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			if n != 1 {
				return fmt.Errorf("read %d bytes, want 1", n)
			}
			return nil
		}
	}
	return fmt.Errorf("unknown call %q", call)
}

// many runs fn on n goroutines at once: the ms until all returned; fails on any error.
func many(n int, fn func() error) {
	var wg sync.WaitGroup
	var failed int64
	var first atomic.Value
	start := time.Now()
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer wg.Done()
			if err := fn(); err != nil {
				if atomic.AddInt64(&failed, 1) == 1 {
					first.Store(err.Error())
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if failed > 0 {
		fail("%d of %d calls failed: %v", failed, n, first.Load())
	}
	fmt.Printf("%.1f\n", float64(el.Nanoseconds())/1e6)
}

func benchBlock(call string, n int, path string) {
	runtime.GOMAXPROCS(2)
	debug.SetMaxThreads(1 << 20)
	many(n, func() error { return blockOnce(call, path) })
}

func benchHTTP(n int, url string) {
	runtime.GOMAXPROCS(2)
	client := &http.Client{
		Transport: &http.Transport{DisableKeepAlives: true, MaxIdleConnsPerHost: -1},
		Timeout:   20 * time.Second,
	}
	many(n, func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 || string(body) != "hello fiber" {
			return fmt.Errorf("status %d, body %q", resp.StatusCode, body)
		}
		return nil
	})
}
