// PromQL fragments shared by the alerts and the dashboard.
{
  // What a counter gained over window, counting a series born inside the window whole.
  // The agent exports a per-service counter only once it has counted something, so a
  // series appears with its first increment already in it: rate() and increase() see a
  // flat series and miss that first increment (one reset, or a whole burst between two
  // scrapes). A series with no sample window ago is new; its value is all it gained.
  gained(selector, window)::
    '(%(s)s unless %(s)s offset %(w)s) or increase(%(s)s[%(w)s])' % { s: selector, w: window },

  // histogram_quantile of a histogram summed by the given labels (plus le).
  quantile(q, metric, selector, by, window)::
    'histogram_quantile(%(q)s, sum by (%(by)s, le) (rate(%(m)s_bucket{%(sel)s}[%(w)s])))'
    % { q: q, m: metric, sel: selector, by: by, w: window },
}
