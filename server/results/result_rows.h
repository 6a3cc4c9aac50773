// The rows of the result files, made from the typed result of a check: msprobe's CSV cells
// (UTF-8, floats with 14 decimals, " " for an empty cell, Python csv's quoting and \r\n) and
// Parity's JSON-lines record. Pure functions; server/results/result_writer.h writes the files.
#pragma once

#include <string>
#include <vector>

#include "parity/v1/parity.pb.h"
#include "server/compare/standards.h"
#include "server/replay/call_checker.h"

namespace parity::server {

// Who sent a call: the stream's Hello, kept for the JSON-lines record.
struct CallOrigin {
  int32_t rank = 0;
  std::string run_id;
  std::string hostname;
};

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

// The lines of one checked call, ready to append.
struct CallRows {
  std::string accuracy_result, accuracy_details;    // accuracy_checking_{result,details}
  std::string precision_result, precision_details;  // api_precision_compare_{result,details}
  std::string json;                                 // parity_results_*.jsonl
};
// `verdict` is ToVerdict(call, check): the JSON record takes its metric names from it.
CallRows RowsOf(const CallOrigin& origin, const v1::ApiCall& call, const CallCheck& check,
                const v1::Verdict& verdict, const StandardsTable& standards);

}  // namespace parity::server
