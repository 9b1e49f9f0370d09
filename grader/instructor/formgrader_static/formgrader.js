/* The course's formgrader (grader/instructor/formgrader.py): nbgrader's tables in pages
 * of 50 rows, with DataTables' own paging and search, which nbgrader's front end turns
 * off; a class of 1,350 students otherwise lays out 1,350 rows at once. Loaded after
 * nbgrader's utils.js, it replaces the one function nbgrader's pages call to make a
 * table. */
var insertDataTable = function (tbl) {
    tbl.DataTable({
        info: true,
        paging: true,
        pageLength: 50,
        lengthMenu: [[50, 200, 1000, -1], [50, 200, 1000, "All"]],
        deferRender: true,
        saveState: true,
        columnDefs: [{
            "targets": "no-sort",
            "orderable": false
        }]
    });
};
