# cmake -DIN=file -DOUT=file.cc [-DNAME=symbol] -P EmbedText.cmake: writes `extern const char
# NAME[]` (default kParityDefaultStandardsJson) holding the file's text.
if(NOT NAME)
  set(NAME kParityDefaultStandardsJson)
endif()
file(READ ${IN} _text)
file(WRITE ${OUT} "extern const char ${NAME}[];\nconst char ${NAME}[] = R\"PARITY_JSON(${_text})PARITY_JSON\";\n")
