// Command threatview-send sends events, one JSON object a line (NDJSON),
// from files or standard input to the Threat View collector, through the
// Go client: batched, gzipped, every event with an event_id, retried until
// delivered. It prints a progress line while it works and a summary at the
// end, and exits 1 when any event was not delivered.
//
//	threatview-send [-url URL] [-token TOKEN] [-spool DIR] [FILE ...]
//
// URL defaults to $THREATVIEW_COLLECTOR_URL, TOKEN to $THREATVIEW_TOKEN or
// else $THREATVIEW_DEMO_TOKEN. With -spool, events are kept on disk until
// delivered: a run that was interrupted sends what it left at the next run
// on the same directory (even with no input: threatview-send -spool DIR
// </dev/null).
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"threatview/sdk/go/threatview"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// maxLine bounds one input line (an event is at most 32 KiB).
const maxLine = 1 << 20

// run is the command; it returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("threatview-send", flag.ContinueOnError)
	fs.SetOutput(stderr)
	token := getenv("THREATVIEW_TOKEN")
	if token == "" {
		token = getenv("THREATVIEW_DEMO_TOKEN")
	}
	url := getenv("THREATVIEW_COLLECTOR_URL")
	if url == "" {
		url = "http://127.0.0.1:8080"
	}
	fs.StringVar(&url, "url", url, "collector base URL")
	fs.StringVar(&token, "token", token, "app token")
	spool := fs.String("spool", "", "directory keeping queued events on disk until delivered")
	batch := fs.Int("batch", threatview.MaxBatchEvents, "events per request (at most 500)")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to keep trying once the input is read")
	every := fs.Duration("progress", time.Second, "progress line interval (0: none)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: threatview-send [flags] [FILE ...]   (NDJSON; no FILE or - reads standard input)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}

	var (
		mu      sync.Mutex
		reports int
	)
	onDrop := func(d threatview.Drop) {
		mu.Lock()
		defer mu.Unlock()
		reports++
		if reports <= 20 {
			fmt.Fprintf(stderr, "dropped %d events (%s", len(d.EventIDs), d.Reason)
			if d.Status != 0 {
				fmt.Fprintf(stderr, ", HTTP %d %s: %s", d.Status, d.Code, d.Message)
			}
			if d.Err != nil {
				fmt.Fprintf(stderr, ", %v", d.Err)
			}
			fmt.Fprintf(stderr, "), first event_id %s\n", d.EventIDs[0])
		}
	}
	c, err := threatview.New(threatview.Config{URL: url, Token: token, SpoolDir: *spool, MaxBatchEvents: *batch, OnDrop: onDrop, UserAgent: "threatview-send/1"})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}

	start := time.Now()
	var lines, invalid int64
	progress := func() {
		s := c.Stats()
		rate := float64(s.Delivered) / time.Since(start).Seconds()
		mu.Lock()
		fmt.Fprintf(stderr, "read %d, delivered %d, pending %d, dropped %d, invalid %d, retries %d (429: %d), %.0f events/s",
			lines, s.Delivered, s.Pending, s.Dropped, invalid, s.Retries, s.Throttled, rate)
		if s.Pending > 0 && s.LastError != "" {
			fmt.Fprintf(stderr, "; last error: %s", s.LastError)
		}
		fmt.Fprintln(stderr)
		mu.Unlock()
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	if *every > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(*every)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					progress()
				}
			}
		}()
	}

	files := fs.Args()
	if len(files) == 0 {
		files = []string{"-"}
	}
	var readErr error
	for _, name := range files {
		if err := sendFile(ctx, c, name, stdin, stderr, &lines, &invalid, &mu); err != nil {
			readErr = err
			break
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), *timeout)
	if ctx.Err() != nil {
		cancel() // interrupted: stop now, the spool keeps what is left
	}
	closeErr := c.Close(cctx)
	cancel()
	close(done)
	wg.Wait()
	progress()

	s := c.Stats()
	fmt.Fprintf(stdout, "%d events delivered, %d dropped, %d invalid lines, in %s\n", s.Delivered, s.Dropped, invalid, time.Since(start).Round(time.Millisecond))
	code := 0
	if readErr != nil {
		fmt.Fprintln(stderr, readErr)
		code = 1
	}
	if closeErr != nil {
		fmt.Fprintln(stderr, closeErr)
		code = 1
	}
	if s.Dropped > 0 || invalid > 0 {
		code = 1
	}
	return code
}

// sendFile queues every line of one input; a line that is not an event is
// reported and counted, and the rest go on.
func sendFile(ctx context.Context, c *threatview.Client, name string, stdin io.Reader, stderr io.Writer, lines, invalid *int64, mu *sync.Mutex) error {
	in := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	r := bufio.NewReaderSize(in, 64<<10)
	for n := 1; ; n++ {
		line, err := readLine(r)
		if len(bytes.TrimSpace(line)) > 0 {
			mu.Lock()
			*lines++
			mu.Unlock()
			if serr := c.SendRaw(ctx, line); serr != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if errors.Is(serr, threatview.ErrClosed) {
					return serr
				}
				mu.Lock()
				*invalid++
				fmt.Fprintf(stderr, "%s:%d: %v\n", name, n, serr)
				mu.Unlock()
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", name, n, err)
		}
	}
}

// readLine reads one line without its newline; a line over maxLine is
// returned cut (the client then refuses it as too large).
func readLine(r *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(out)+len(chunk) <= maxLine {
			out = append(out, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(out, "\r\n"), err
	}
}
