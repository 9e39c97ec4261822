// One self-contained HTML report (no external assets): counts, enablement matrix, failures, inline SVG plots.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace opcts {

/// The whole report as one HTML page: outcome counts (per arch), the enablement matrix, every
/// gate failure with its message and repro line (the first 500), inline SVG plots — per
/// family, each case's error ÷ bound on a log axis (a strip per family; exact results in their
/// own column) —, the tightness table (reports/tightness.hpp) and the slowest cases as a bar chart. No script, no
/// external file; every text from the records is made valid UTF-8 and escaped.
std::string html_report(const std::vector<ResultRecord>& records, const std::string& title);

/// Text made safe for HTML element content and quoted attribute values: invalid UTF-8 and
/// control characters become "\xNN" (sanitize_xml_text), then & < > " ' become references.
std::string html_escape(std::string_view text);

}  // namespace opcts
