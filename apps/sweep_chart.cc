#include "apps/sweep_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace moesplit::app {

namespace {

constexpr int kW = 760, kH = 440;                                 // canvas, px
constexpr int kLeft = 70, kRight = 220, kTop = 40, kBottom = 50;  // plot margins (legend right)
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string F(const char* fmt, double a, double b = 0, double c = 0, double d = 0) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), fmt, a, b, c, d);
  return buf;
}

// A "nice" axis maximum and tick step for values up to v (1, 2 or 5 x 10^k steps, ~5 ticks).
void NiceAxis(double v, double* max, double* step) {
  if (v <= 0) v = 1;
  const double raw = v / 5, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  *step = (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
  *max = std::ceil(v / *step) * *step;
}

}  // namespace

std::string SweepChartSvg(const std::vector<BenchTest>& tests, const std::string& title) {
  // series name -> (threads, t/s) points
  std::map<std::string, std::vector<std::pair<int, double>>> series;
  int max_threads = 1;
  double max_ts = 0;
  for (const BenchTest& t : tests) {
    const std::string name = (t.numa.empty() ? "default" : t.numa) + ", " + t.Name();
    series[name].push_back({t.n_threads, t.AvgTs()});
    max_threads = std::max(max_threads, t.n_threads);
    max_ts = std::max(max_ts, t.AvgTs());
  }
  double y_max = 1, y_step = 1;
  NiceAxis(max_ts * 1.05, &y_max, &y_step);
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  const int x_min = 1, x_max = std::max(2, max_threads);
  auto px = [&](double threads) { return kLeft + pw * (threads - x_min) / (x_max - x_min); };
  auto py = [&](double ts) { return kTop + ph * (1 - ts / y_max); };
  std::string s =
      F("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
        "font-family=\"sans-serif\" font-size=\"12\">\n",
        kW, kH);
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += F("<text x=\"%g\" y=\"22\" font-size=\"14\">", kLeft) + Escape(title) + "</text>\n";
  for (double v = 0; v <= y_max + 1e-9; v += y_step) {  // y grid and labels
    s += F("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>\n", kLeft, py(v),
           kLeft + pw, py(v));
    s += F("<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%g</text>\n", kLeft - 6, py(v) + 4, v);
  }
  const int x_step = std::max(1, (x_max - x_min) / 10);
  for (int x = x_min; x <= x_max; x += x_step) {  // x ticks
    s += F("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%g</text>\n", px(x), kTop + ph + 18, x);
  }
  s += F("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", kLeft, kTop + ph,
         kLeft + pw, kTop + ph);
  s += F("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", kLeft, kTop, kLeft,
         kTop + ph);
  s +=
      F("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">threads</text>\n", kLeft + pw / 2, kH - 12);
  s +=
      F("<text transform=\"translate(16 %g) rotate(-90)\" text-anchor=\"middle\">tokens/s"
        "</text>\n",
        kTop + ph / 2);
  int i = 0;
  for (auto& [name, pts] : series) {
    std::sort(pts.begin(), pts.end());
    const char* color = kColors[i % std::size(kColors)];
    std::string path;
    for (const auto& [x, y] : pts) path += F("%g,%g ", px(x), py(y));
    s += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" + std::string(color) +
         "\" points=\"" + path + "\"/>\n";
    for (const auto& [x, y] : pts) {
      s += F("<circle cx=\"%g\" cy=\"%g\" r=\"3.5\" fill=\"", px(x), py(y)) + color + "\"><title>" +
           Escape(name) + F(": %g threads, %.2f t/s", x, y) + "</title></circle>\n";
    }
    const double ly = kTop + 10 + 18 * i;
    s += F("<rect x=\"%g\" y=\"%g\" width=\"14\" height=\"3\" fill=\"", kLeft + pw + 16, ly - 4) +
         color + "\"/>\n";
    s += F("<text x=\"%g\" y=\"%g\">", kLeft + pw + 36, ly) + Escape(name) + "</text>\n";
    ++i;
  }
  s += "</svg>\n";
  return s;
}

}  // namespace moesplit::app
