/* The course's formgrader (grader/instructor/formgrader.py): nbgrader's tables of more than 50 rows in pages
 * of 50 rows, with DataTables' own paging and search, which nbgrader's front end turns
 * off; a class of 1,350 students otherwise lays out 1,350 rows at once. Loaded after
 * nbgrader's utils.js, it replaces the one function nbgrader's pages call to make a
 * table. The table is made into a DataTable while it is out of the page, so that reading
 * its columns' styles does not lay out every row first, and without measuring column
 * widths (the browser sizes the 50 rows shown). */
var insertDataTable = function (tbl) {
    var table = $(tbl);
    var long = table.find("tbody > tr").length > 50;  // a short table stays as nbgrader shows it
    var holder = $("<div/>");
    var marker = $("<span/>").insertBefore(table);
    holder.append(table);
    table.DataTable({
        info: long,
        paging: long,
        pageLength: 50,
        lengthMenu: [[50, 200, 1000, -1], [50, 200, 1000, "All"]],
        autoWidth: false,
        columnDefs: [{
            "targets": "no-sort",
            "orderable": false
        }]
    });
    marker.replaceWith(holder.contents());
};
