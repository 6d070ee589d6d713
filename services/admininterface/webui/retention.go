package webui

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"threatview/admininterface"
	"threatview/admininterface/cleanupcmd"
)

// RetentionReader reads one database's partitions and archive records.
type RetentionReader interface {
	// Partitions lists the managed tables' partitions; errors wrap ErrUnavailable.
	Partitions(ctx context.Context) ([]admininterface.Partition, error)
	// Archives lists the verified archives; errors wrap ErrUnavailable.
	Archives(ctx context.Context) ([]admininterface.Archive, error)
}

type archiveRow struct {
	admininterface.Archive
	Present bool  // the partition is still in the database
	NowRows int64 // its row estimate when present
}

type retentionData struct {
	Partitions []admininterface.Partition
	Archives   []archiveRow
	Errors     []string
	DryRun     *cleanupcmd.Result
	CanDryRun  bool
}

func (s *Server) retentionPage(w http.ResponseWriter, r *http.Request) {
	s.renderRetention(w, r, nil)
}

func (s *Server) renderRetention(w http.ResponseWriter, r *http.Request, dry *cleanupcmd.Result) {
	d := retentionData{DryRun: dry, CanDryRun: len(s.opts.CleanupCommand) > 0}
	if len(s.deps.Retention) == 0 {
		d.Errors = append(d.Errors, "No database is configured (EVENTS_DATABASE_URL, AUDIT_DATABASE_DSN).")
	}
	present := map[string]admininterface.Partition{}
	var archives []admininterface.Archive
	for _, rd := range s.deps.Retention {
		ps, err := rd.Partitions(r.Context())
		if err != nil {
			s.log.Warn("retention partitions", "err", err)
			d.Errors = append(d.Errors, "A database did not answer for its partitions.")
		}
		for _, p := range ps {
			present[p.Database+"/"+p.Name] = p
		}
		d.Partitions = append(d.Partitions, ps...)
		as, err := rd.Archives(r.Context())
		if err != nil {
			s.log.Warn("retention archives", "err", err)
			d.Errors = append(d.Errors, "A database did not answer for its archives.")
		}
		archives = append(archives, as...)
	}
	for _, a := range archives {
		p, ok := present[a.Database+"/"+a.Partition]
		d.Archives = append(d.Archives, archiveRow{Archive: a, Present: ok, NowRows: p.Rows})
	}
	s.render(w, r, http.StatusOK, "retention", "Retention", d, "", "")
}

func (s *Server) retentionDryRun(w http.ResponseWriter, r *http.Request) {
	if len(s.opts.CleanupCommand) == 0 {
		s.fail(w, r, http.StatusNotFound, "not_found", "No cleanup command is configured (ADMINUI_CLEANUP_COMMAND).")
		return
	}
	// The server's write timeout is sized for pages; the dry run may take
	// longer on big databases.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(90 * time.Second))
	res := cleanupcmd.DryRun(r.Context(), s.opts.CleanupCommand, s.opts.CleanupEnv, time.Minute)
	s.log.Info("cleanup dry run", "by", sessionOf(r).User.Username, "lines", len(res.Lines), "err", res.Err, "seconds", res.Duration.Seconds())
	s.renderRetention(w, r, &res)
}

// bytesHuman prints a size in binary units.
func bytesHuman(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
