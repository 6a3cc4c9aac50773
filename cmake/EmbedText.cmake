# cmake -DIN=file -DOUT=file.cc -P EmbedText.cmake: writes `extern const char
# kParityDefaultStandardsJson[]` holding the file's text.
file(READ ${IN} _text)
file(WRITE ${OUT} "extern const char kParityDefaultStandardsJson[];\nconst char kParityDefaultStandardsJson[] = R\"PARITY_JSON(${_text})PARITY_JSON\";\n")
