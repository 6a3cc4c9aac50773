// The rows of the result files, made from the typed result of a check: msprobe's CSV cells
// (UTF-8, floats with 14 decimals, " " for an empty cell, Python csv's quoting and \r\n) and
// Parity's JSON-lines record. Pure functions; server/results/result_writer.h writes the files.
#pragma once

#include <string>
#include <vector>

#include "server/call/call_origin.h"
#include "server/call/call_outcome.h"
#include "server/call/server_call.h"
#include "server/compare/standards.h"

namespace parity::server {

// A double as msprobe's csv writer prints it: "%.14f", and "nan", "inf", "-inf".
// The local time as msprobe stamps its files and records: YYYYMMDDhhmmss.
std::string Now14();

std::string CsvDouble(double v);
// Cells joined by commas, quoted where they hold a comma, quote or newline; ends in \r\n.
std::string CsvRow(const std::vector<std::string>& cells);
// "(2, 3)", "(5,)", "()".
std::string ShapeTuple(const std::vector<int64_t>& shape);

// The headers of the four CSVs.
const std::vector<std::string>& ResultHeader(bool precision);  // "API name" / "API Name"
const std::vector<std::string>& AccuracyDetailsHeader();       // 23 columns
const std::vector<std::string>& PrecisionDetailsHeader();      // 28 columns

// The lines of one checked call, ready to append, and its part of its API's result row.
// Rows are named as msprobe names them (common::MsprobeCsvName): details rows
// "{api}.forward.output.{i}" and "{api}.backward.output.{n}", where a backward call's outputs are
// numbered on from those of the backward calls of the same API before it in the step (one
// forward call may run several: linear's mm, mm and sum), so every row name is unique in a step.
struct CallRows {
  std::string accuracy_details;   // accuracy_checking_details
  std::string precision_details;  // api_precision_compare_details
  std::string json;               // parity_results_*.jsonl (Parity's own names)
  std::string api;                // the result row it belongs to: "Functional.linear.0"
  bool backward = false;          // which column of that row
  CheckStatus status = CheckStatus::kUnspecified;
  std::string message;  // why, when not pass
};
// `first_backward_output`: the number of a backward call's first output row (above).
CallRows RowsOf(const CallOrigin& origin, const ServerCall& call, const CallOutcome& check,
                const StandardsTable& standards, uint32_t first_backward_output = 0);

// A direction's cell of a result row, msprobe's aggregation of the statuses of its output rows
// (get_api_checker_result): none " ", all SKIP "SKIP", any error "error", else any Warning
// "Warning", else "pass". A rejected call counts as SKIP.
std::string DirectionCell(const std::vector<CheckStatus>& statuses);
// One row of accuracy_checking_result / api_precision_compare_result: API name, forward and
// backward cells, message.
std::string ResultRow(const std::string& api, const std::vector<CheckStatus>& forward,
                      const std::vector<CheckStatus>& backward, const std::string& message);

}  // namespace parity::server
